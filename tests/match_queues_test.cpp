// Receive matching (core/matching): MPI's order with per-source queues, an
// any-source list and posting stamps.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
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

// Alternately a full record and a small one: matching treats both alike.
unexpected_message* arrive(match_queues& q, int source, std::uint64_t tag) {
  static int n = 0;
  unexpected_message* u = nullptr;
  if (n++ % 2 == 0) {
    message_state m;
    m.source = source;
    m.tag = tag;
    u = match_queues::make_full(std::move(m));
  } else {
    u = match_queues::make_small(source, tag, 0, {});
  }
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
  unexpected_message::destroy(m1);
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

TEST_CASE("a small unexpected record keeps the whole message inside one 64-byte block") {
  const std::byte payload[8] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
  unexpected_message* u = match_queues::make_small(5, 0x1234, 77, std::span<const std::byte>(payload, 8));
  CHECK(static_cast<unsigned>(u->small) == 1);
  CHECK(static_cast<unsigned>(u->source) == 5);
  CHECK(u->tag == 0x1234);
  CHECK(u->seq == 77);
  CHECK(u->length() == 8);
  auto* s = static_cast<unexpected_small*>(u);
  CHECK(std::memcmp(s->bytes, payload, 8) == 0);
  // (56 bytes: malloc serves it from a 64-byte block, what the credit charges.)
  CHECK(sizeof(unexpected_small) + 8 <= wire::small_message_credit);
  unexpected_message::destroy(u);

  // The largest rank a record can name, and an empty message.
  unexpected_message* e = match_queues::make_small(unexpected_message::max_sources - 1, 1, 0, {});
  CHECK(static_cast<unsigned>(e->source) == static_cast<std::uint32_t>(unexpected_message::max_sources - 1));
  CHECK(e->length() == 0);
  unexpected_message::destroy(e);

  message_state m;
  m.source = 3;
  m.tag = 9;
  m.seq = 4;
  unexpected_full* f = match_queues::make_full(std::move(m));
  CHECK(static_cast<unsigned>(f->small) == 0);
  CHECK(static_cast<unsigned>(f->source) == 3);
  CHECK(f->length() == message_state::unknown);  // not known until its last chunk
  CHECK(f->msg.unexpected == f);
  unexpected_message::destroy(f);

  match_queues q;
  CHECK_THROWS_AS(q.resize(unexpected_message::max_sources + 1), std::length_error);
}

TEST_CASE("small records given back are reused with fresh contents, and only up to the bound") {
  match_queues q;
  q.resize(4);
  const std::byte a[8] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                          std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
  const std::byte b[3] = {std::byte{9}, std::byte{10}, std::byte{11}};
  unexpected_message* u = q.new_small(1, 0x10, 5, std::span<const std::byte>(a, 8));
  q.add_unexpected(*u);
  REQUIRE(q.first_unexpected(1, 0x10, ~std::uint64_t{0}) == u);
  q.remove_unexpected(*u);
  q.free_small(static_cast<unexpected_small*>(u));
  // The same block comes back, holding the new message only, and it can be
  // queued again (its hooks are fresh).
  unexpected_message* v = q.new_small(2, 0x20, 6, std::span<const std::byte>(b, 3));
  CHECK(v == u);
  CHECK(static_cast<unsigned>(v->source) == 2);
  CHECK(v->tag == 0x20);
  CHECK(v->seq == 6);
  CHECK(v->length() == 3);
  CHECK(std::memcmp(static_cast<unexpected_small*>(v)->bytes, b, 3) == 0);
  q.add_unexpected(*v);
  CHECK(q.first_unexpected(2, 0x20, ~std::uint64_t{0}) == v);
  CHECK(q.first_unexpected(1, 0x10, ~std::uint64_t{0}) == nullptr);
  q.remove_unexpected(*v);
  q.free_small(static_cast<unexpected_small*>(v));
  // More than the bound given back: the others are freed (the sanitizer
  // build checks that nothing leaks at the end either way).
  std::vector<unexpected_message*> many;
  for (std::size_t i = 0; i < match_queues::kSmallKept + 10; ++i) many.push_back(q.new_small(0, i, 0, {}));
  for (unexpected_message* m : many) q.free_small(static_cast<unexpected_small*>(m));
}
