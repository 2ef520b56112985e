// A distributed-shared-memory page server on nmad::rpc. Rank 0 owns the
// pages (64 KiB each); every other rank is a client that asks for pages by
// number and writes some back. A request's header (express) packs, per
// page, the client's id, the page number, a flag and the access type; the
// answer's header (express) gives per page its number and a found flag,
// and its body (cheaper: the engine may deliver it behind the headers)
// the pages found, sent from the server's memory without a copy.
//
//   nmad-run -n 2 ./dsm_page_server                      # check and time
//   nmad-run -n 3 ./dsm_page_server --requests 2000 --per-request 3 --json
//
// Each client first writes its own page and reads it back, asks for a page
// that does not exist (found = 0), then times `requests` read requests of
// `per-request` pages each (every page checked) and prints the time per
// request (--json: one JSON line per client).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nmad/nmad.hpp>
#include <nmad/rpc.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::size_t page_size = 64 * 1024;
constexpr nmad::rpc::service_id page_service = 1;
constexpr nmad::tag_t done_tag = 5;

enum class access : std::uint32_t { read = 0, write = 1 };

struct page_request {  // one per page, in the request header
  std::uint32_t client;
  std::uint32_t flag;  // 1: the client wants the answer even if the page is missing
  std::uint64_t page;
  access type;
  std::uint32_t reserved;
};

struct page_answer {  // one per page, in the answer header
  std::uint64_t page;
  std::uint32_t found;
  std::uint32_t reserved;
};

// The contents a page starts with: each 8-byte word names its page and place.
std::uint64_t word_of(std::uint64_t page, std::size_t i) { return (page << 32) ^ (i * 0x9e3779b9u); }

void fill_page(std::byte* p, std::uint64_t page) {
  for (std::size_t i = 0; i < page_size / 8; ++i) {
    const std::uint64_t w = word_of(page, i);
    std::memcpy(p + 8 * i, &w, 8);
  }
}

bool page_is(const std::byte* p, std::uint64_t page) {
  for (std::size_t i = 0; i < page_size / 8; i += 61) {  // every 61st word
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    if (w != word_of(page, i)) return false;
  }
  std::uint64_t last;
  std::memcpy(&last, p + page_size - 8, 8);
  return last == word_of(page, page_size / 8 - 1);
}

struct options {
  int requests = 1000;
  int per_request = 3;
  std::uint64_t pages = 256;
  bool json = false;
};

int serve(nmad::session& s, const options& o) {
  nmad::rpc::endpoint ep(s);
  std::vector<std::byte> memory(o.pages * page_size);
  for (std::uint64_t p = 0; p < o.pages; ++p) fill_page(memory.data() + p * page_size, p);
  std::vector<page_answer> answers;
  ep.register_service(page_service, [&](const nmad::rpc::incoming& in, nmad::rpc::reply& out) {
    const std::size_t n = in.header.size() / sizeof(page_request);
    if (n == 0 || in.header.size() % sizeof(page_request)) throw std::runtime_error("malformed page request");
    answers.assign(n, page_answer{});
    std::size_t written = 0;
    for (std::size_t i = 0; i < n; ++i) {
      page_request rq;
      std::memcpy(&rq, in.header.data() + i * sizeof rq, sizeof rq);
      const bool found = rq.page < o.pages;
      answers[i] = {rq.page, found ? 1u : 0u, 0};
      if (!found) continue;
      std::byte* page = memory.data() + rq.page * page_size;
      if (rq.type == access::write) {
        if (in.body.size() < (written + 1) * page_size) throw std::runtime_error("write without its page");
        std::memcpy(page, in.body.data() + written * page_size, page_size);
        ++written;
      } else {
        out.add_body({page, page_size});  // sent from the server's memory
      }
    }
    out.set_header(answers.data(), answers.size() * sizeof(page_answer));
  });
  // Serve until every client said it is done.
  std::vector<nmad::request> done(s.size());
  std::vector<int> token(s.size());
  for (int r = 1; r < s.size(); ++r) s.irecv(r, done_tag, &token[r], sizeof(int), done[r]);
  ep.serve_until([&] {
    for (int r = 1; r < s.size(); ++r)
      if (!done[r].completed()) return false;
    return true;
  });
  if (!o.json) std::printf("server: %llu requests served\n", static_cast<unsigned long long>(ep.served()));
  return 0;
}

// One request of `pages.size()` pages; false (with a message) if an answer is wrong.
bool request_pages(nmad::rpc::endpoint& ep, int me, const std::vector<std::uint64_t>& pages, access type,
                   std::span<const std::byte> body, std::vector<std::byte>& into, std::vector<page_answer>& found) {
  std::vector<page_request> rq(pages.size());
  for (std::size_t i = 0; i < pages.size(); ++i)
    rq[i] = {static_cast<std::uint32_t>(me), 1, pages[i], type, 0};
  nmad::rpc::call c;
  const nmad::errc e = ep.call_sync(0, page_service, std::as_bytes(std::span(rq)), body, c, into);
  if (e != nmad::errc::ok) {
    std::fprintf(stderr, "client %d: %s\n", me, c.error_message().c_str());
    return false;
  }
  const auto h = c.reply_header();
  if (h.size() != pages.size() * sizeof(page_answer)) {
    std::fprintf(stderr, "client %d: answer header of %zu bytes\n", me, h.size());
    return false;
  }
  found.resize(pages.size());
  std::memcpy(found.data(), h.data(), h.size());
  return true;
}

int client(nmad::session& s, const options& o) {
  nmad::rpc::endpoint ep(s);
  const int me = s.rank();
  std::vector<std::byte> into(static_cast<std::size_t>(o.per_request) * page_size);
  std::vector<page_answer> found;
  // Write a page of our own (its contents: another page's) and read it back.
  const std::uint64_t mine = static_cast<std::uint64_t>(me) % o.pages;
  std::vector<std::byte> page(page_size);
  fill_page(page.data(), 1000 + me);
  if (!request_pages(ep, me, {mine}, access::write, page, into, found) || found[0].found != 1) return 1;
  if (!request_pages(ep, me, {mine}, access::read, {}, into, found) || found[0].found != 1 ||
      !page_is(into.data(), 1000 + me)) {
    std::fprintf(stderr, "client %d: page %llu did not read back as written\n", me, static_cast<unsigned long long>(mine));
    return 1;
  }
  // A page that does not exist: found = 0, no body.
  if (!request_pages(ep, me, {o.pages + 7}, access::read, {}, into, found) || found[0].found != 0 ||
      found[0].page != o.pages + 7) {
    std::fprintf(stderr, "client %d: a missing page was not reported missing\n", me);
    return 1;
  }
  // Timed reads: per_request pages per request, pages others did not write.
  std::vector<std::uint64_t> pages(static_cast<std::size_t>(o.per_request));
  std::uint64_t next = 97 * static_cast<std::uint64_t>(me);
  auto pick = [&] {
    for (auto& p : pages) {
      do next = (next * 6364136223846793005ULL + 1442695040888963407ULL);
      while ((next >> 33) % o.pages < static_cast<std::uint64_t>(s.size()));
      p = (next >> 33) % o.pages;
    }
  };
  const int warmup = std::min(100, o.requests / 10 + 1);
  std::chrono::steady_clock::time_point start;
  for (int i = -warmup; i < o.requests; ++i) {
    if (i == 0) start = std::chrono::steady_clock::now();
    pick();
    if (!request_pages(ep, me, pages, access::read, {}, into, found)) return 1;
    for (std::size_t k = 0; k < pages.size(); ++k)
      if (found[k].page != pages[k] || found[k].found != 1 || !page_is(into.data() + k * page_size, pages[k])) {
        std::fprintf(stderr, "client %d: page %llu came back wrong\n", me, static_cast<unsigned long long>(pages[k]));
        return 1;
      }
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                    std::max(1, o.requests);
  if (o.json)
    std::printf("{\"bench\": \"dsm\", \"client\": %d, \"clients\": %d, \"strategy\": \"%s\", \"driver\": \"%s\", "
                "\"pages_per_request\": %d, \"requests\": %d, \"us_per_request\": %.2f, \"verified\": true}\n",
                me, s.size() - 1, std::string(s.strategy_name()).c_str(), s.driver_name().c_str(), o.per_request,
                o.requests, us);
  else
    std::printf("client %d: %d requests of %d pages, %.2f us per request (strategy %s, driver %s)\n", me, o.requests,
                o.per_request, us, std::string(s.strategy_name()).c_str(), s.driver_name().c_str());
  int token = 0;
  nmad::request r;
  s.isend(0, done_tag, &token, sizeof token, r);
  s.wait(r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::stol(argv[++i]);
    };
    try {
      if (a == "--requests") o.requests = static_cast<int>(value());
      else if (a == "--per-request") o.per_request = static_cast<int>(value());
      else if (a == "--pages") o.pages = static_cast<std::uint64_t>(value());
      else if (a == "--json") o.json = true;
      else throw std::invalid_argument("unknown option " + a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dsm_page_server: %s\nusage: dsm_page_server [--requests N] [--per-request K] [--pages P] [--json]\n",
                   e.what());
      return 2;
    }
  }
  if (o.requests < 0 || o.per_request < 1 || o.per_request > 64 || o.pages < 16) {
    std::fprintf(stderr, "dsm_page_server: need --requests >= 0, 1 <= --per-request <= 64, --pages >= 16\n");
    return 2;
  }
  try {
    auto s = nmad::session::create();
    if (s->size() < 2) {
      std::fprintf(stderr, "dsm_page_server: run it with 2 or more ranks (nmad-run -n 2)\n");
      return 2;
    }
    return s->rank() == 0 ? serve(*s, o) : client(*s, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsm_page_server: %s\n", e.what());
    return 1;
  }
}
