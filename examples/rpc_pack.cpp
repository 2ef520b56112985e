// Request/answer with pack/unpack: rank 0 serves "upper-case this text"
// requests from every other rank. A request is packed as
//   [service id: express] [length: express] [text: cheaper]
// so the server can read the id and the length at once, size its buffer,
// and let the engine deliver the body however it likes.
//   nmad-run -n 3 ./rpc_pack
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <nmad/nmad.hpp>
#include <string>
#include <vector>

constexpr nmad::tag_t request_tag = 10, answer_tag = 11;
constexpr std::uint32_t upper_service = 1;

int main() {
  auto s = nmad::session::create();
  if (s->rank() == 0) {
    for (int served = 0; served < s->size() - 1; ++served) {
      nmad::unpack_connection in(*s, nmad::any_source, request_tag);
      std::uint32_t service = 0;
      std::uint64_t len = 0;
      in.unpack(&service, sizeof service, nmad::pack_mode::express);
      in.unpack(&len, sizeof len, nmad::pack_mode::express);  // readable now
      std::string text(len, '\0');
      in.unpack(text.data(), len, nmad::pack_mode::cheaper);
      if (in.end() != nmad::errc::ok || service != upper_service) return 1;
      const int client = in.source();
      std::printf("server: rank %d asked service %u for \"%s\"\n", client, service, text.c_str());
      for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      nmad::pack_connection out(*s, client, answer_tag);
      out.pack(&len, sizeof len, nmad::pack_mode::express);
      out.pack(text.data(), len, nmad::pack_mode::cheaper);
      out.end();
    }
  } else {
    std::string text = "hello from rank " + std::to_string(s->rank()) + ", please shout this back";
    std::uint64_t len = text.size();
    {
      nmad::pack_connection out(*s, 0, request_tag);
      out.pack(&upper_service, sizeof upper_service, nmad::pack_mode::express);
      out.pack(&len, sizeof len, nmad::pack_mode::express);
      out.pack(text.data(), len, nmad::pack_mode::cheaper);
      if (out.end() != nmad::errc::ok) return 1;
    }
    nmad::unpack_connection in(*s, 0, answer_tag);
    std::uint64_t alen = 0;
    in.unpack(&alen, sizeof alen, nmad::pack_mode::express);
    std::string answer(alen, '\0');
    in.unpack(answer.data(), alen, nmad::pack_mode::cheaper);
    if (in.end() != nmad::errc::ok) return 1;
    std::printf("client %d: got \"%s\"\n", s->rank(), answer.c_str());
  }
  return 0;
}
