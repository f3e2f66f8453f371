#include <gtest/gtest.h>

#include "test_env.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new fairsem::test::RedisEnvironment);
  return RUN_ALL_TESTS();
}
