#===- AddKiln.cmake - thin wrappers over add_mlir_* -----------*- cmake -*-===//
# SPDX-License-Identifier: Apache-2.0
#
# Each wrapper calls the matching add_mlir_* function, records the library in a
# global list the tools link, and depends on kiln-headers (all TableGen output).
#===----------------------------------------------------------------------===//

function(add_kiln_dialect_library name)
  set_property(GLOBAL APPEND PROPERTY KILN_DIALECT_LIBS ${name})
  add_mlir_library(${ARGV} DEPENDS kiln-headers DISABLE_INSTALL EXCLUDE_FROM_LIBMLIR)
endfunction()

function(add_kiln_conversion_library name)
  set_property(GLOBAL APPEND PROPERTY KILN_CONVERSION_LIBS ${name})
  add_mlir_library(${ARGV} DEPENDS kiln-headers DISABLE_INSTALL EXCLUDE_FROM_LIBMLIR)
endfunction()

function(add_kiln_translation_library name)
  set_property(GLOBAL APPEND PROPERTY KILN_TRANSLATION_LIBS ${name})
  add_mlir_library(${ARGV} DEPENDS kiln-headers DISABLE_INSTALL EXCLUDE_FROM_LIBMLIR)
endfunction()

function(add_kiln_library name)
  add_mlir_library(${ARGV} DEPENDS kiln-headers DISABLE_INSTALL EXCLUDE_FROM_LIBMLIR)
endfunction()

# add_kiln_doc(td_file output_name command) - documentation from a .td file,
# generated into ${CMAKE_BINARY_DIR}/docs under the kiln-doc target.
function(add_kiln_doc td_filename output_file command)
  set(LLVM_TARGET_DEFINITIONS ${td_filename}.td)
  mlir_tablegen(${output_file}.md ${command} ${ARGN})
  set(GEN_DOC_FILE ${CMAKE_BINARY_DIR}/docs/${output_file}.md)
  add_custom_command(
    OUTPUT ${GEN_DOC_FILE}
    COMMAND ${CMAKE_COMMAND} -E copy
            ${CMAKE_CURRENT_BINARY_DIR}/${output_file}.md ${GEN_DOC_FILE}
    DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${output_file}.md)
  add_custom_target(${output_file}DocGen DEPENDS ${GEN_DOC_FILE})
  add_dependencies(kiln-doc ${output_file}DocGen)
endfunction()
