// Built against the hiredis Findhiredis found: prints the header's version and uses the
// library, so a header and a library from different installs show up.
#include <hiredis/hiredis.h>

#include <cstdio>

int main() {
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) return 1;
  redisReaderFeed(reader, "+OK\r\n", 5);
  void* reply = nullptr;
  const int rc = redisReaderGetReply(reader, &reply);
  redisReaderFree(reader);
  if (rc != REDIS_OK || reply == nullptr) return 1;
  freeReplyObject(reply);
  std::printf("hiredis %d.%d.%d\n", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
  return 0;
}
