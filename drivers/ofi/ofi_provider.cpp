// Provider selection for the ofi driver: what it asks of a provider, what
// each provider offered can do, the providers usable here best first
// (ofi_ranking.hpp), and probing them for nmad-info (see ofi_internal.hpp).
#include <algorithm>

#include "drivers/ofi/ofi_internal.hpp"

namespace nmad::ofi_detail {

tunables read_tunables() {
  tunables t;
  t.connect_timeout = config::milliseconds("NMAD_OFI_CONNECT_TIMEOUT_MS");
  t.mr_cache = static_cast<std::size_t>(config::integer("NMAD_OFI_MR_CACHE"));
  t.rma = config::word("NMAD_OFI_RMA");
  if (config::is_set("NMAD_OFI_PROVIDER")) {
    t.provider = config::text("NMAD_OFI_PROVIDER");
    t.provider_source = "NMAD_OFI_PROVIDER";
  } else if (const char* f = std::getenv("FI_PROVIDER"); f && *f) {
    t.provider = f;
    t.provider_source = "FI_PROVIDER";
  }
  t.domain = config::text("NMAD_OFI_DOMAIN");
  return t;
}

// What the driver asks of a provider.
info_ptr make_hints(const std::string& provider) {
  info_ptr h(ofi_library::require().dupinfo(nullptr));
  if (!h) throw std::runtime_error("ofi driver: fi_dupinfo failed (out of memory)");
  h->caps = FI_TAGGED | FI_SEND | FI_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  // Every mode but local registration: those only concern RMA targets,
  // which this driver does not expose.
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  if (!provider.empty()) h->fabric_attr->prov_name = ::strdup(provider.c_str());
  return h;
}

bool in_shm_segment(const fi_info* i) {
  if (i->addr_format != FI_ADDR_STR || !i->src_addr || i->src_addrlen == 0) return false;
  const auto* a = static_cast<const char*>(i->src_addr);
  return !ofi_shm::segment_file(std::string_view(a, ::strnlen(a, i->src_addrlen))).empty();
}

namespace {

std::string domain_of(const fi_info* i) { return i->domain_attr->name ? i->domain_attr->name : ""; }

// The entry of `list` for provider `prov` in domain `dom`, or null.
fi_info* entry_for(fi_info* list, const std::string& prov, const std::string& dom) {
  for (fi_info* i = list; i; i = i->next)
    if (i->addr_format != FI_SOCKADDR_IN6 && prov == i->fabric_attr->prov_name && dom == domain_of(i)) return i;
  return nullptr;
}

// fi_getinfo for the driver's needs with `caps` more; its answer in `ret`.
info_ptr ask(const std::string& forced, std::uint64_t caps, int& ret) {
  info_ptr hints = make_hints(forced);
  hints->caps |= caps;
  fi_info* raw = nullptr;
  ret = ofi_library::getinfo(hints.get(), &raw);
  return info_ptr(raw);
}

}  // namespace

std::vector<candidate> candidates(fi_info* list, const std::string& domain) {
  std::vector<candidate> out;
  for (fi_info* i = list; i; i = i->next) {
    const std::string prov = i->fabric_attr->prov_name;
    if (i->addr_format == FI_SOCKADDR_IN6) continue;  // one entry per provider: IPv4 or named
    auto it = std::find_if(out.begin(), out.end(), [&](const candidate& c) { return c.provider == prov; });
    const std::string dom = domain_of(i);
    const bool wanted = domain.empty() ? dom == "lo" : dom == domain;
    if (it == out.end()) {
      if (!domain.empty() && !wanted) continue;
      candidate c;
      c.provider = prov;
      c.info = i;
      out.push_back(std::move(c));
    } else if (wanted && domain_of(it->info) != dom && domain.empty()) {
      it->info = i;  // the loopback domain over the first one listed
    }
  }
  return out;
}

survey survey_providers(const std::string& forced, const std::string& domain, bool want_rma) {
  survey s;
  s.plain = ask(forced, 0, s.ret);
  std::vector<candidate> found;
  if (s.ret == 0) found = candidates(s.plain.get(), domain);
  if (found.empty()) return s;
  // Each capability asked for on its own: libfabric leaves out the entries
  // of a provider that cannot do it, also where that provider does not
  // report the bit in its entries (see ofi_ranking.hpp).
  int ret = 0;
  s.remote = ask(forced, FI_REMOTE_COMM, ret);
  s.local = ask(forced, FI_LOCAL_COMM, ret);
  s.rma = ask(forced, FI_RMA | FI_READ | FI_REMOTE_READ, s.rma_ret);
  std::vector<ofi_ranking::offer> offers;
  for (candidate& c : found) {
    const std::string dom = domain_of(c.info);
    c.rma_info = entry_for(s.rma.get(), c.provider, dom);
    const fi_info* opened = want_rma && c.rma_info ? c.rma_info : c.info;
    ofi_ranking::offer& o = c.traits;
    o.provider = c.provider;
    o.domain = dom;
    o.remote = entry_for(s.remote.get(), c.provider, dom) != nullptr;
    o.local = entry_for(s.local.get(), c.provider, dom) != nullptr;
    o.rma_read = c.rma_info != nullptr;
    o.rx_queue = opened->rx_attr->size;
    o.inject = opened->tx_attr->inject_size;
    offers.push_back(o);
  }
  for (std::size_t k : ofi_ranking::rank(offers, want_rma, forced)) s.ranked.push_back(std::move(found[k]));
  return s;
}

}  // namespace nmad::ofi_detail

namespace nmad {

using ofi_detail::candidate;
using ofi_detail::ofi_driver;

std::string ofi_provider_criteria() { return ofi_ranking::kCriteria; }

std::vector<ofi_provider_status> ofi_probe_providers() {
  std::vector<ofi_provider_status> out;
  const ofi_detail::tunables tun = ofi_detail::read_tunables();
  const ofi_detail::survey offered = ofi_detail::survey_providers("", tun.domain, tun.rma != "off");
  if (offered.ret != 0) {
    out.push_back({"(none)", false, std::string("fi_getinfo: ") + ofi_library::strerror(-offered.ret), {}});
    return out;
  }
  struct quiet_events final : driver_events {
    void on_connected(connection_id, int) override {}
    void on_packet(connection_id, std::span<const std::byte>) override {}
    void on_send_done(void*) override {}
    void on_recv_data_done(void*, std::size_t) override {}
    void on_connection_failed(connection_id, std::string_view) override {}
  } ev;
  for (const candidate& c : offered.ranked) {
    ofi_provider_status s{c.provider, false, {}, ofi_ranking::describe(c.traits)};
    try {
      ofi_driver d(c.provider);
      d.open({0, 1, "nmad-info", &ev});
      const driver_caps& k = d.caps();
      s.usable = true;
      s.detail = "domain " + c.traits.domain + ", max iov " + std::to_string(k.max_iov) + ", inline " +
                 std::to_string(k.max_inline) + " B" + ", sleep on " +
                 (d.has_wait_fd() ? "the CQ's wait fd" : "nothing (busy)") +
                 (k.rdma_get ? ", RMA read rendezvous" : ", no RMA read") + (k.node_local ? ", this host only" : "");
    } catch (const std::exception& e) {
      s.detail = e.what();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace nmad
