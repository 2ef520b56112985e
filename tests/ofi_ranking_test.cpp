// The ofi driver's order of providers (drivers/ofi/ofi_ranking.hpp) on
// made-up offers: no libfabric, no provider. The first cases are the offers
// Debian 12's libfabric 1.17 makes on a host with `lo` and `eth0` (what
// fi_getinfo answers for the driver's needs, and again with FI_REMOTE_COMM,
// FI_LOCAL_COMM and RMA read in the hints); the others take one criterion
// at a time.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "drivers/ofi/ofi_ranking.hpp"

using nmad::ofi_ranking::offer;

namespace {

offer make(std::string prov, std::string dom, bool remote, bool local, bool rma, std::size_t rx, std::size_t inj) {
  offer o;
  o.provider = std::move(prov);
  o.domain = std::move(dom);
  o.remote = remote;
  o.local = local;
  o.rma_read = rma;
  o.rx_queue = rx;
  o.inject = inj;
  return o;
}

std::vector<std::string> names(const std::vector<offer>& offers, bool want_rma = true) {
  std::vector<std::string> out;
  for (std::size_t i : nmad::ofi_ranking::rank(offers, want_rma)) out.push_back(offers[i].provider);
  return out;
}

// libfabric's order of providers, each in the driver's domain of choice
// (`lo` unless NMAD_OFI_DOMAIN names another). On `lo`, net and sockets
// report FI_LOCAL_COMM only and are not offered for FI_REMOTE_COMM;
// tcp;ofi_rxm, net;ofi_rxm and udp;ofi_rxd report neither bit and are
// offered for both; shm reports neither and is offered for neither.
std::vector<offer> debian_offers(const std::string& dom) {
  const bool eth = dom != "lo";
  return {
      make("tcp;ofi_rxm", dom, true, true, true, 2048, 64),
      make("net", dom, eth, true, true, 256, 128),
      make("net;ofi_rxm", dom, true, true, true, 2048, 64),
      make("udp;ofi_rxd", dom, true, true, true, 1024, 1256),
      make("shm", "shm", false, false, true, 1024, 4096),
      make("sockets", dom, eth, true, true, 256, 255),
  };
}

}  // namespace

TEST_CASE("libfabric 1.17's offers on lo: tcp;ofi_rxm first, shm and the loopback-only cores node-local") {
  const auto offers = debian_offers("lo");
  CHECK(names(offers) ==
        std::vector<std::string>{"tcp;ofi_rxm", "net;ofi_rxm", "udp;ofi_rxd", "shm", "sockets", "net"});
  for (const offer& o : offers) {
    CAPTURE(o.provider);
    const bool expect_local = o.provider == "shm" || o.provider == "net" || o.provider == "sockets";
    CHECK(o.node_local() == expect_local);
    CHECK(o.this_host());
  }
  // Without the RMA rendezvous the order is the same: every offer has it.
  CHECK(names(offers, false) == names(offers, true));
}

TEST_CASE("libfabric 1.17's offers on eth0: the cores reach other hosts, shm stays last") {
  const auto offers = debian_offers("eth0");
  CHECK(names(offers) ==
        std::vector<std::string>{"tcp;ofi_rxm", "net;ofi_rxm", "udp;ofi_rxd", "sockets", "net", "shm"});
  for (const offer& o : offers) CHECK(o.node_local() == (o.provider == "shm"));
}

TEST_CASE("reach decides first: a node-local offer better in everything else ranks after one that reaches other hosts") {
  const std::vector<offer> offers = {
      make("fast-local", "d", false, true, true, 1 << 16, 1 << 16),
      make("plain-remote", "d", true, true, false, 16, 0),
  };
  CHECK(names(offers) == std::vector<std::string>{"plain-remote", "fast-local"});
  CHECK(offers[0].node_local());
  CHECK_FALSE(offers[1].node_local());
}

TEST_CASE("an offer for other hosts only (FI_REMOTE_COMM without FI_LOCAL_COMM) ranks after one that reaches this host too") {
  const std::vector<offer> offers = {
      make("remote-only", "d", true, false, true, 4096, 4096),
      make("both", "d", true, true, false, 64, 0),
      make("local", "d", false, true, true, 4096, 4096),
  };
  CHECK(names(offers) == std::vector<std::string>{"both", "remote-only", "local"});
  CHECK_FALSE(offers[0].this_host());
  CHECK_FALSE(offers[0].node_local());
}

TEST_CASE("RMA read counts only where the RMA rendezvous is wanted") {
  const std::vector<offer> offers = {
      make("deep", "d", true, true, false, 4096, 64),
      make("rma", "d", true, true, true, 1024, 64),
  };
  CHECK(names(offers, true) == std::vector<std::string>{"rma", "deep"});
  CHECK(names(offers, false) == std::vector<std::string>{"deep", "rma"});
}

TEST_CASE("then the deeper receive queue, then the larger inject size; equal offers keep libfabric's order") {
  const std::vector<offer> offers = {
      make("a", "d", true, true, true, 1024, 64),    make("b", "d", true, true, true, 2048, 0),
      make("c", "d", true, true, true, 1024, 4096),  make("d", "d", true, true, true, 1024, 64),
      make("e", "d", true, true, true, 2048, 0),
  };
  CHECK(names(offers) == std::vector<std::string>{"b", "e", "c", "a", "d"});
  // Reversed input: the equal pairs swap, nothing else moves.
  const std::vector<offer> reversed(offers.rbegin(), offers.rend());
  CHECK(names(reversed) == std::vector<std::string>{"e", "b", "c", "d", "a"});
  CHECK_FALSE(nmad::ofi_ranking::better(offers[0], offers[3], true));
  CHECK_FALSE(nmad::ofi_ranking::better(offers[3], offers[0], true));
}

TEST_CASE("a provider the user names comes first whatever it can do; the others libfabric matched follow by rank") {
  // NMAD_OFI_PROVIDER=net on lo: libfabric answers net and net;ofi_rxm.
  const std::vector<offer> net = {
      make("net", "lo", false, true, true, 256, 128),
      make("net;ofi_rxm", "lo", true, true, true, 2048, 64),
  };
  CHECK(names(net) == std::vector<std::string>{"net;ofi_rxm", "net"});
  std::vector<std::string> got;
  for (std::size_t i : nmad::ofi_ranking::rank(net, true, "net")) got.push_back(net[i].provider);
  CHECK(got == std::vector<std::string>{"net", "net;ofi_rxm"});
  // A name that is no provider's (a libfabric filter such as "^tcp"): the
  // ranking alone.
  got.clear();
  const auto offers = debian_offers("lo");
  for (std::size_t i : nmad::ofi_ranking::rank(offers, true, "^tcp")) got.push_back(offers[i].provider);
  CHECK(got == names(offers));
}

TEST_CASE("no offer, one offer") {
  CHECK(nmad::ofi_ranking::rank({}, true).empty());
  CHECK(nmad::ofi_ranking::rank({make("only", "d", false, false, false, 0, 0)}, true) ==
        std::vector<std::size_t>{0});
}

TEST_CASE("describe: the facts weighed, in the ranking's order") {
  const auto offers = debian_offers("lo");
  CHECK(nmad::ofi_ranking::describe(offers[0]) == "other hosts and this one, RMA read, receive queue 2048, inject 64 B");
  CHECK(nmad::ofi_ranking::describe(offers[4]) == "this host only, RMA read, receive queue 1024, inject 4096 B");
  CHECK(nmad::ofi_ranking::describe(make("x", "d", true, false, false, 8, 0)) ==
        "other hosts only, no RMA read, receive queue 8, inject 0 B");
}
