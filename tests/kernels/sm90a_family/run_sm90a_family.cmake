# cmake -DKERNELS_DIR=... -DWORK_DIR=... -DCUDA_COMPILER=... -P run_sm90a_family.cmake:
# configures and builds the project beside this file; fails if either step does.
foreach(step configure build)
  if(step STREQUAL configure)
    set(command ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK_DIR}
                -DKERNELS_DIR=${KERNELS_DIR} -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER})
  else()
    set(command ${CMAKE_COMMAND} --build ${WORK_DIR})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sm_90a family project: ${step} failed (${rc})")
  endif()
endforeach()
message(STATUS "an sm_90a family compiled beside the portable one")
