# Read by llama.cpp's CMakeLists right after its project() call (scripts/serve_llm.sh passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE): llama-cpp-python forces llama.cpp's `common` library on, though
# its Python package loads only libllama and ggml (and libmtmd, which requirements/llm-server-cmake-args.txt
# leaves out). `common` and the HTTP library it needs are more than half of the build's CPU time
# (180 and 23 of 385 CPU-s, counted per object file): without them the wheel builds in half the time.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
