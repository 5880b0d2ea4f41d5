# Writes OUT, a C++ source defining `const char* FUNCTION()` that returns the text of IN
# (the explorer's script and style sheet travel inside the binary, so a page needs no files).
file(READ "${IN}" text)
string(FIND "${text}" ")vitreg_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )vitreg_embed\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake.\n#include \"explore_assets.hpp\"\n\nconst char* vitreg::render::${FUNCTION}() {\n    return R\"vitreg_embed(${text})vitreg_embed\";\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
