// The translation unit that compiles the test programs' precompiled headers (tests/CMakeLists.txt:
// meridian_test_pch); it has nothing of its own.
