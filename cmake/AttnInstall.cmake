# cmake --install <build> [--prefix DIR]: what a machine or another project
# needs from attnserve.
#
#   bin/                       attn_server, attn_cli, attn_loadgen (+ attn_bench, attn_tune with CUDA)
#                              and lib/libattn_client_c.so (the C ABI, include/attn/client/c_api.h):
#                              those built; a partial build (demo.sh builds attn_server and
#                              attn_cli) installs what it has and names what it skipped
#   include/attn/client/       the C++ client's headers
#   include/attn/              dtype.h, tensor.h, problem.h (attn::core), version.h
#   include/attnserve/v1/      attention.proto and its generated .pb.h/.grpc.pb.h
#   lib/                       libattn_client.a, libattn_core.a, libattn_proto.a,
#                              libattn_health_proto.a (grpc.health.v1, used inside the client)
#   lib/cmake/attnserve/       attnserveConfig.cmake: find_package(attnserve) gives
#                              attnserve::client (and ::core, ::proto, ::version)
#
# The client links attn::core, never the kernel library, so a consumer needs
# gRPC, protobuf and Abseil, not CUDA.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnserve)

set(attn_install_programs attn_server attn_cli attn_loadgen attn_bench attn_tune attn_client_c)
foreach(program ${attn_install_programs})
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} OPTIONAL
                               LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)
    install(CODE "if(NOT EXISTS \"$<TARGET_FILE:${program}>\")
  message(STATUS \"Not installed: ${program}, which is not built \"
                 \"(cmake --build ${PROJECT_BINARY_DIR} --target ${program})\")
endif()")
  endif()
endforeach()

install(TARGETS attn_client attn_core attn_proto attn_version attn_health_proto
        EXPORT attnserveTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/attn/client
                  ${PROJECT_SOURCE_DIR}/client/c_api/include/attn/client
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
install(FILES ${PROJECT_SOURCE_DIR}/kernels/include/attn/dtype.h
              ${PROJECT_SOURCE_DIR}/kernels/include/attn/tensor.h
              ${PROJECT_SOURCE_DIR}/kernels/include/attn/problem.h
              ${PROJECT_SOURCE_DIR}/kernels/include/attn/c_dtype.h
              ${PROJECT_BINARY_DIR}/generated/include/attn/version.h
              ${PROJECT_SOURCE_DIR}/proto/include/attn/http2_tuning.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
install(FILES ${PROJECT_SOURCE_DIR}/proto/attnserve/v1/attention.proto
              ${PROJECT_BINARY_DIR}/proto/gen/attnserve/v1/attention.pb.h
              ${PROJECT_BINARY_DIR}/proto/gen/attnserve/v1/attention.grpc.pb.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnserve/v1)

install(EXPORT attnserveTargets NAMESPACE attnserve:: DESTINATION ${ATTN_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnserveConfig.cmake.in
  ${PROJECT_BINARY_DIR}/attnserveConfig.cmake
  INSTALL_DESTINATION ${ATTN_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnserveConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnserveConfig.cmake
              ${PROJECT_BINARY_DIR}/attnserveConfigVersion.cmake
        DESTINATION ${ATTN_INSTALL_CMAKEDIR})
