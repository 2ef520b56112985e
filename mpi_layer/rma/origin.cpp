// The origin's side: records of operations in flight on the message path,
// control requests (lock, unlock, flush, complete), waits that watch the
// targets' liveness, and the reporting of errors targets answered.
#include <cstring>

#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi::rma {

namespace {

// Completes what can complete of one record (mu held).
void advance_record(op_record& r) {
  if (!r.sends_done && r.hdr.completed() && (!r.has_follow || r.follow.completed())) {
    r.sends_done = true;
    nmad::errc e = r.hdr.error();
    if (e == nmad::errc::ok && r.has_follow) e = r.follow.error();
    if (e != nmad::errc::ok && r.error == MPI_SUCCESS) {
      r.error = from_errc(e);
      r.detail = "a request to window rank " + std::to_string(r.target) + " failed: " +
                 (r.hdr.error() != nmad::errc::ok ? r.hdr.error_message() : r.follow.error_message());
    }
  }
  if (r.raw_answer && !r.answer_done && r.answer.completed()) {
    r.answer_done = true;
    const std::size_t got = r.answer.status().length;
    if (r.answer.error() != nmad::errc::ok) {
      if (r.error == MPI_SUCCESS) {
        r.error = from_errc(r.answer.error());
        r.detail = "the answer of window rank " + std::to_string(r.target) + " failed: " + r.answer.error_message();
      }
    } else if (got == sizeof(wire_ack)) {  // (raw answers are longer than kInlineBytes)
      // An error answered instead of the data (kFlagRawAnswer).
      wire_ack ack;
      std::memcpy(&ack, r.result_buf, sizeof ack);
      if (r.error == MPI_SUCCESS) {
        r.error = ack.error != MPI_SUCCESS ? ack.error : MPI_ERR_INTERN;
        r.detail = "an operation addressed memory outside window rank " + std::to_string(r.target) + "'s window";
      }
    }
  }
  if (r.wants_answer && !r.raw_answer && !r.answer_done && r.answer.completed()) {
    r.answer_done = true;
    if (r.answer.error() != nmad::errc::ok) {
      if (r.error == MPI_SUCCESS) {
        r.error = from_errc(r.answer.error());
        r.detail = "the answer of window rank " + std::to_string(r.target) + " failed: " + r.answer.error_message();
      }
    } else if (r.answer_bytes.size() >= sizeof(wire_ack)) {
      wire_ack ack;
      std::memcpy(&ack, r.answer_bytes.data(), sizeof ack);
      if (ack.error != MPI_SUCCESS && r.error == MPI_SUCCESS) {
        r.error = ack.error;
        r.detail = ack.error == MPI_ERR_RMA_RANGE
                       ? "an operation addressed memory outside window rank " + std::to_string(r.target) + "'s window"
                       : "window rank " + std::to_string(r.target) + " could not serve an operation";
      } else if (r.result_buf && r.result_type) {
        const std::byte* data = r.answer_bytes.data() + sizeof(wire_ack);
        const auto len = static_cast<Count>(r.answer_bytes.size() - sizeof(wire_ack));
        Count pos = 0;
        try {
          r.result_type.unpack(data, len, pos, r.result_buf, r.result_count);
        } catch (const DatatypeError& e) {
          r.error = datatype_error_class(e, true);
          r.detail = e.what();
        }
      }
    }
  }
  r.finished = r.sends_done && (!r.wants_answer || r.answer_done);
}

}  // namespace

bool target_failed(const window& w, int t, std::string& detail) {
  if (t == w.rank || st().session->peer_alive(w.world_of(t))) return false;
  detail = "window rank " + std::to_string(t) + " (world rank " + std::to_string(w.world_of(t)) + ") has failed";
  return true;
}

void reap_locked(window& w) {
  for (auto it = w.inflight.begin(); it != w.inflight.end();) {
    op_record& r = **it;
    advance_record(r);
    if (r.finished) {
      if (r.error != MPI_SUCCESS && w.target_error[static_cast<std::size_t>(r.target)] == MPI_SUCCESS) {
        w.target_error[static_cast<std::size_t>(r.target)] = r.error;
        w.error_detail = r.detail;
      }
      it = w.inflight.erase(it);
    } else {
      ++it;
    }
  }
}

int take_errors_locked(window& w, const std::vector<int>& targets, std::string& detail) {
  int err = MPI_SUCCESS;
  auto take = [&](int t) {
    int& e = w.target_error[static_cast<std::size_t>(t)];
    if (e != MPI_SUCCESS && err == MPI_SUCCESS) {
      err = e;
      detail = w.error_detail;
    }
    e = MPI_SUCCESS;
  };
  if (targets.empty())
    for (int t = 0; t < w.size; ++t) take(t);
  else
    for (int t : targets) take(t);
  return err;
}

int wait_for(window& w, const std::vector<int>& watch, const std::function<bool()>& pred, std::string& detail) {
  nmad::session& s = *st().session;
  int dead = -1;
  bool ok = false;
  auto done = [&] {
    {
      std::lock_guard g(w.mu);
      reap_locked(w);
      if (pred()) {
        ok = true;
        return true;
      }
    }
    for (int t : watch)
      if (t >= 0 && target_failed(w, t, detail)) {
        dead = t;
        return true;
      }
    return false;
  };
  if (done()) return ok ? MPI_SUCCESS : MPI_ERR_PROC_FAILED;
  s.wait_until(done);
  if (ok) return MPI_SUCCESS;
  detail += " before answering";
  return MPI_ERR_PROC_FAILED;
}

int drain(window& w, int t, std::string& detail) {
  std::vector<int> watch;
  if (t >= 0) {
    watch.push_back(t);
  } else {
    std::lock_guard g(w.mu);
    for (auto& r : w.inflight) watch.push_back(r->target);
  }
  const int e = wait_for(
      w, watch,
      [&] {
        for (auto& r : w.inflight)
          if (t < 0 || r->target == t) return false;
        return true;
      },
      detail);
  if (e != MPI_SUCCESS) return e;
  std::lock_guard g(w.mu);
  return take_errors_locked(w, t >= 0 ? std::vector<int>{t} : std::vector<int>{}, detail);
}

int send_control_locked(window& w, int t, kind k, int lock_type, std::string& detail) {
  auto r = std::make_shared<op_record>();
  r->target = t;
  wire_header h{};
  h.kind = static_cast<std::uint8_t>(k);
  h.lock_type = lock_type == MPI_LOCK_EXCLUSIVE ? 1 : 0;
  nmad::session& s = *st().session;
  if (k == kind::unlock || k == kind::flush) {
    h.tag = w.take_tag();
    r->wants_answer = true;
    r->flush_ack = true;
    r->answer_bytes.resize(sizeof(wire_ack));
    s.irecv(w.world_of(t), w.tag(static_cast<int>(h.tag)), r->answer_bytes.data(), r->answer_bytes.size(),
            r->answer);
  }
  r->wire.resize(sizeof h);
  std::memcpy(r->wire.data(), &h, sizeof h);
  const nmad::errc e = s.isend(w.world_of(t), w.tag(kTagRequest), r->wire.data(), r->wire.size(), r->hdr);
  ++w.sent[static_cast<std::size_t>(t)];
  if (e != nmad::errc::ok) {
    detail = "window rank " + std::to_string(t) + ": " + r->hdr.error_message();
    return from_errc(e);
  }
  w.inflight.push_back(std::move(r));
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi::rma
