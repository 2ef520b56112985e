// Provider selection for the ofi driver: what it asks of a provider, the
// providers usable here in order of preference, and probing them for
// nmad-info (see ofi_internal.hpp).
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

bool is_node_local(const fi_info* i) { return std::string_view(i->fabric_attr->prov_name) == "shm"; }

bool in_shm_segment(const fi_info* i) {
  if (i->addr_format != FI_ADDR_STR || !i->src_addr || i->src_addrlen == 0) return false;
  const auto* a = static_cast<const char*>(i->src_addr);
  return !ofi_shm::segment_file(std::string_view(a, ::strnlen(a, i->src_addrlen))).empty();
}

std::vector<candidate> candidates(fi_info* list, const std::string& domain) {
  std::vector<candidate> out;
  for (fi_info* i = list; i; i = i->next) {
    const std::string prov = i->fabric_attr->prov_name;
    if (i->addr_format == FI_SOCKADDR_IN6) continue;  // one entry per provider: IPv4 or named
    auto it = std::find_if(out.begin(), out.end(), [&](const candidate& c) { return c.provider == prov; });
    const std::string dom = i->domain_attr->name ? i->domain_attr->name : "";
    const bool wanted = domain.empty() ? dom == "lo" : dom == domain;
    if (it == out.end()) {
      if (!domain.empty() && !wanted) continue;
      out.push_back({prov, i});
    } else if (wanted && std::string_view(it->info->domain_attr->name ? it->info->domain_attr->name : "") != dom &&
               domain.empty()) {
      it->info = i;  // the loopback domain over the first one listed
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const candidate& a, const candidate& b) {
    auto rank = [](const std::string& p) {
      for (std::size_t k = 0; k < std::size(kPreference); ++k)
        if (p == kPreference[k]) return static_cast<int>(k);
      return static_cast<int>(std::size(kPreference));
    };
    return rank(a.provider) < rank(b.provider);
  });
  return out;
}

}  // namespace nmad::ofi_detail

namespace nmad {

using ofi_detail::candidate;
using ofi_detail::info_ptr;
using ofi_detail::ofi_driver;
using ofi_detail::make_hints;
using ofi_detail::candidates;

std::vector<ofi_provider_status> ofi_probe_providers() {
  std::vector<ofi_provider_status> out;
  const std::string domain = ofi_detail::read_tunables().domain;
  info_ptr hints = make_hints("");
  fi_info* raw = nullptr;
  const int ret = ofi_library::getinfo(hints.get(), &raw);
  info_ptr list(raw);
  if (ret != 0) {
    out.push_back({"(none)", false, std::string("fi_getinfo: ") + ofi_library::strerror(-ret)});
    return out;
  }
  struct quiet_events final : driver_events {
    void on_connected(connection_id, int) override {}
    void on_packet(connection_id, std::span<const std::byte>) override {}
    void on_send_done(void*) override {}
    void on_recv_data_done(void*, std::size_t) override {}
    void on_connection_failed(connection_id, std::string_view) override {}
  } ev;
  for (const candidate& c : candidates(list.get(), domain)) {
    ofi_provider_status s{c.provider, false, {}};
    try {
      ofi_driver d(c.provider);
      d.open({0, 1, "nmad-info", &ev});
      const driver_caps& k = d.caps();
      s.usable = true;
      s.detail = std::string("domain ") + (c.info->domain_attr->name ? c.info->domain_attr->name : "?") +
                 ", max iov " + std::to_string(k.max_iov) + ", inline " + std::to_string(k.max_inline) + " B" +
                 ", sleep on " + (d.has_wait_fd() ? "the CQ's wait fd" : "nothing (busy)") +
                 (k.rdma_get ? ", RMA read rendezvous" : ", no RMA read") +
                 (k.node_local ? ", this host only" : "");
    } catch (const std::exception& e) {
      s.detail = e.what();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace nmad
