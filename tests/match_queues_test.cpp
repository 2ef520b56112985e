// Receive matching (core/matching): MPI's order with per-source queues, an
// any-source list and posting stamps.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <vector>

#include "core/matching/match_queues.hpp"

using namespace nmad;

namespace {

constexpr int any = match_queues::any;
constexpr std::uint64_t all = ~std::uint64_t{0};

void set(request_state& r, int source, std::uint64_t tag, std::uint64_t mask = all) {
  r.source_filter = source;
  r.tag_filter = tag;
  r.tag_mask = mask;
}

unexpected_message* arrive(match_queues& q, int source, std::uint64_t tag) {
  auto* u = new unexpected_message();
  u->msg.source = source;
  u->msg.tag = tag;
  q.add_unexpected(*u);
  return u;
}

}  // namespace

TEST_CASE("a message goes to the receive posted first among those that match") {
  match_queues q;
  q.resize(4);
  request_state a, b, c, d;
  set(a, 2, 5);
  set(b, any, 5);
  set(c, 2, 5);
  set(d, any, 0, 0);  // any tag
  q.post(a);
  q.post(b);
  q.post(c);
  q.post(d);
  // From rank 2: a (posted before the any-source b).
  CHECK(q.first_posted(2, 5) == &a);
  q.unpost(a);
  // Now b was posted before c.
  CHECK(q.first_posted(2, 5) == &b);
  q.unpost(b);
  CHECK(q.first_posted(2, 5) == &c);
  // From rank 1 with another tag: only the wildcard d.
  CHECK(q.first_posted(1, 9) == &d);
  // No receive for rank 3, tag 5 except d.
  CHECK(q.first_posted(3, 5) == &d);
  q.unpost(c);
  q.unpost(d);
  CHECK_FALSE(q.any_posted());
  CHECK(q.first_posted(2, 5) == nullptr);
}

TEST_CASE("tag masks select on the masked bits only") {
  match_queues q;
  q.resize(2);
  request_state r;
  set(r, 1, 0xab00, 0xff00);
  q.post(r);
  CHECK(q.first_posted(1, 0xab42) == &r);
  CHECK(q.first_posted(1, 0xac42) == nullptr);
  CHECK(q.first_posted(0, 0xab42) == nullptr);
  CHECK(q.unpost(r));
  CHECK_FALSE(q.unpost(r));  // not posted any more
}

TEST_CASE("a receive takes the unexpected message that arrived first") {
  match_queues q;
  q.resize(3);
  unexpected_message* m1 = arrive(q, 1, 7);
  unexpected_message* m0 = arrive(q, 0, 7);
  unexpected_message* m1b = arrive(q, 1, 8);
  CHECK(q.first_unexpected(any, 7, all) == m1);
  CHECK(q.first_unexpected(0, 7, all) == m0);
  CHECK(q.first_unexpected(1, 0, 0) == m1);  // any tag
  CHECK(q.first_unexpected(2, 7, all) == nullptr);
  q.remove_unexpected(*m1);
  delete m1;
  CHECK(q.first_unexpected(any, 0, 0) == m0);
  CHECK(q.first_unexpected(1, 0, 0) == m1b);
  int seen = 0;
  q.for_each_unexpected(1, [&](unexpected_message& u) {
    CHECK(&u == m1b);
    ++seen;
  });
  CHECK(seen == 1);
  // free_unexpected (also run by the destructor) frees the rest.
}

TEST_CASE("drain_posted removes a source's receives, or the any-source ones") {
  match_queues q;
  q.resize(3);
  request_state a, b, c;
  set(a, 1, 1);
  set(b, 1, 2);
  set(c, any, 1);
  q.post(a);
  q.post(b);
  q.post(c);
  std::vector<request_state*> got;
  q.drain_posted(1, [&](request_state& r) { got.push_back(&r); });
  CHECK(got == std::vector<request_state*>{&a, &b});
  CHECK(q.any_posted());
  q.drain_posted(any, [&](request_state& r) { got.push_back(&r); });
  CHECK(got.size() == 3);
  CHECK_FALSE(q.any_posted());
  CHECK_FALSE(a.posted.is_linked());
}

// The per-source structures against the rule they implement: one list of
// every receive in posting order, scanned linearly.
TEST_CASE("random posts and arrivals match like one linearly scanned list") {
  std::mt19937 rng(12345);
  constexpr int sources = 4;
  constexpr int n = 400;
  match_queues q;
  q.resize(sources);
  std::vector<std::unique_ptr<request_state>> reqs;
  std::vector<request_state*> reference;  // posting order
  for (int step = 0; step < 4000; ++step) {
    if (reqs.size() < n && (rng() % 2 == 0 || reference.empty())) {
      auto r = std::make_unique<request_state>();
      const int src = static_cast<int>(rng() % (sources + 1)) - 1;  // -1 = any
      const bool any_tag = rng() % 5 == 0;
      set(*r, src, rng() % 3, any_tag ? 0 : all);
      q.post(*r);
      reference.push_back(r.get());
      reqs.push_back(std::move(r));
    } else {
      const int src = static_cast<int>(rng() % sources);
      const std::uint64_t tag = rng() % 3;
      request_state* expected = nullptr;
      for (request_state* r : reference)
        if (match_queues::matches(r->source_filter, r->tag_filter, r->tag_mask, src, tag)) {
          expected = r;
          break;
        }
      request_state* got = q.first_posted(src, tag);
      REQUIRE(got == expected);
      if (got) {
        q.unpost(*got);
        std::erase(reference, got);
      }
    }
  }
  for (request_state* r : reference) q.unpost(*r);
  CHECK_FALSE(q.any_posted());
}
