# Read by llama.cpp's CMakeLists right after its project() call (scripts/serve_llm.sh passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE), to build less of what a CPU server of a small model never runs.
#
# llama-cpp-python forces llama.cpp's `common` library on, though its Python package loads only
# libllama and ggml (and libmtmd, which requirements/llm-server-cmake-args.txt leaves out). `common`
# and the HTTP library it needs were more than half of the build's CPU time (180 and 23 of 385 s,
# counted per object file).
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
# libllama itself (model loading, graph building, tokenizer, sampling) is compiled with -O1 once the
# directory has defined it: the arithmetic is ggml's, which keeps -O3. A 1,716-token prompt with its
# answer took 7.4-7.8 s a request at -O3 and 7.5-8.0 s at -O1 (three requests each, the same
# answers); the build took 132 CPU-s instead of 164.
cmake_language(DEFER CALL set_property TARGET llama APPEND PROPERTY COMPILE_OPTIONS -O1)
