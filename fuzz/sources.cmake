# The fuzz targets' code and names, for the libFuzzer binaries (fuzz/CMakeLists.txt) and the test
# that replays their seeds and findings (tests/CMakeLists.txt).
set(VITREG_FUZZ_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/targets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/eval_targets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/repair_targets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/search_targets.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_files.cpp)
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/targets.txt VITREG_FUZZ_TARGETS)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/targets.txt)
