#include "server/response_event_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace mkserve::server {
namespace {

using std::chrono::milliseconds;

std::string Event(int n) { return "event: e\ndata: {\"n\":" + std::to_string(n) + "}\n\n"; }

TEST(ResponseEventLogTest, NumbersEveryEventOfAnAppendAndReadsPastAny) {
  ResponseEventLog log;
  log.Append(Event(0) + Event(1));
  log.Append(Event(2));
  ResponseEventLog::Read all = log.After(-1, milliseconds(0));
  EXPECT_EQ(all.events, Event(0) + Event(1) + Event(2));
  EXPECT_EQ(all.last, 2);
  EXPECT_FALSE(all.ended);
  EXPECT_EQ(log.After(1, milliseconds(0)).events, Event(2));
  // Nothing new yet: empty after the wait, and the position stays.
  ResponseEventLog::Read none = log.After(2, milliseconds(10));
  EXPECT_EQ(none.events, "");
  EXPECT_EQ(none.last, 2);
  EXPECT_FALSE(none.ended);
  log.Close();
  EXPECT_TRUE(log.After(2, milliseconds(0)).ended);
  EXPECT_TRUE(log.After(7, milliseconds(0)).ended);  // past the end of a closed log
  ResponseEventLog::Read tail = log.After(0, milliseconds(0));
  EXPECT_EQ(tail.events, Event(1) + Event(2));
  EXPECT_TRUE(tail.ended);
}

TEST(ResponseEventLogTest, AReaderWaitsForTheNextAppendOrTheClose) {
  ResponseEventLog log;
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    log.Append(Event(0));
    std::this_thread::sleep_for(milliseconds(20));
    log.Close();
  });
  EXPECT_EQ(log.After(-1, milliseconds(5000)).events, Event(0));
  EXPECT_TRUE(log.After(0, milliseconds(5000)).ended);
  writer.join();
}

TEST(ResponseEventLogTest, PastItsBoundTheOldestGoAndAReaderBehindThemIsTold) {
  const int64_t size = static_cast<int64_t>(Event(0).size());
  ResponseEventLog log(3 * size);
  for (int i = 0; i < 5; ++i) log.Append(Event(i));
  EXPECT_EQ(log.bytes(), 3 * size);
  ResponseEventLog::Read lost = log.After(0, milliseconds(0));  // event 1 went
  EXPECT_TRUE(lost.lost);
  EXPECT_EQ(lost.events, "");
  EXPECT_EQ(log.After(1, milliseconds(0)).events, Event(2) + Event(3) + Event(4));
  // One event over the bound alone stays: the newest is always there.
  log.Append(std::string(4 * size, 'x') + "\n\n");
  EXPECT_EQ(log.After(4, milliseconds(0)).last, 5);
  EXPECT_TRUE(log.After(3, milliseconds(0)).lost);
}

}  // namespace
}  // namespace mkserve::server
