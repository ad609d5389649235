// Links against the googletest libraries strata built or restored.
#include <gtest/gtest.h>

TEST(StrataExample, RestoredLibrariesWork) {
  EXPECT_EQ(2 + 2, 4);
  EXPECT_STREQ("strata", "strata");
}
