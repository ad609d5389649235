# strata.cmake: wrap build actions with the strata L1 action cache.
#
#   include(/path/to/strata/cmake/strata.cmake)
#   strata_cache_command(<out_var>
#       DOMAIN third_party|custom_operator  UNIT <name>  OUTPUT_DIR <dir>
#       ENVIRONMENT_PROFILE host-cxx|ascendc|bare
#       [SOC <soc>] [OPERATOR <op>] [ACTION <action>] [OPERATOR_SOURCE <dir>] [REPO_ROOT <dir>]
#       [PUBLISH_DIR <dir>] [PUBLISH_STATE_DIR <dir>]
#       [PREPARED_INPUT <path>...] [RECIPE_FILE <path>...] [RECIPE_VALUE <str>...]
#       [ENVIRONMENT_FILE <path>...] [ENVIRONMENT_VALUE <str>...] [ENVIRONMENT_TOOL <tool>...]
#       [NORMALIZE_PATH <dir>...] [ARTIFACT_INCLUDE <glob>...] [EXCLUDE <glob>...]
#       [SET_ENV NAME=VALUE...]
#       COMMAND <build command and arguments>...)
#
# <out_var> receives the wrapped command as a list, ready for add_custom_command(COMMAND ...)
# or ExternalProject's BUILD_COMMAND. Every element is a separate argument, so spaces survive.
#
# Cache variables:
#   STRATA_EXECUTABLE  the strata binary (default: found on PATH, or $ENV{STRATA_EXECUTABLE})
#   STRATA_CACHE_DIR   the L1 cache root (default: $ENV{STRATA_CACHE_ROOT}, else
#                      ${CMAKE_SOURCE_DIR}/.strata-cache)
#
# Relative OUTPUT_DIR, PUBLISH_DIR and PUBLISH_STATE_DIR are taken relative to
# ${CMAKE_CURRENT_BINARY_DIR}; relative OPERATOR_SOURCE, REPO_ROOT, PREPARED_INPUT,
# RECIPE_FILE, ENVIRONMENT_FILE and NORMALIZE_PATH relative to ${CMAKE_CURRENT_SOURCE_DIR}.
# The C and C++ compilers of the project (CMAKE_C_COMPILER, CMAKE_CXX_COMPILER, when set) are
# always passed as ENVIRONMENT_TOOL, so their --version output is toolchain identity.
#
# ${CMAKE_SOURCE_DIR} and ${CMAKE_BINARY_DIR} are always passed as --normalize-path (they become
# <PATH_0> and <PATH_1>), so a checkout or build tree at another absolute path reuses entries.
# Only normalise a root when everything compiled through it is declared as PREPARED_INPUT,
# RECIPE_* or ENVIRONMENT_*: an undeclared input behind a normalised root can give a false HIT.

include_guard(GLOBAL)

if(NOT DEFINED STRATA_EXECUTABLE OR STRATA_EXECUTABLE STREQUAL "" OR STRATA_EXECUTABLE MATCHES "-NOTFOUND$")
  if(DEFINED ENV{STRATA_EXECUTABLE} AND NOT "$ENV{STRATA_EXECUTABLE}" STREQUAL "")
    set(_strata_default "$ENV{STRATA_EXECUTABLE}")
  else()
    unset(_strata_default CACHE)
    find_program(_strata_default strata)
  endif()
  set(STRATA_EXECUTABLE "${_strata_default}" CACHE FILEPATH "The strata executable" FORCE)
endif()

if(NOT DEFINED STRATA_CACHE_DIR OR STRATA_CACHE_DIR STREQUAL "")
  if(DEFINED ENV{STRATA_CACHE_ROOT} AND NOT "$ENV{STRATA_CACHE_ROOT}" STREQUAL "")
    set(_strata_cache "$ENV{STRATA_CACHE_ROOT}")
  else()
    set(_strata_cache "${CMAKE_SOURCE_DIR}/.strata-cache")
  endif()
  set(STRATA_CACHE_DIR "${_strata_cache}" CACHE PATH "Root of the strata L1 action cache")
endif()
get_filename_component(STRATA_CACHE_DIR "${STRATA_CACHE_DIR}" ABSOLUTE)

function(strata_cache_command out_var)
  set(_single DOMAIN UNIT SOC OPERATOR ACTION OPERATOR_SOURCE REPO_ROOT OUTPUT_DIR PUBLISH_DIR
              PUBLISH_STATE_DIR ENVIRONMENT_PROFILE)
  set(_multi PREPARED_INPUT RECIPE_FILE RECIPE_VALUE ENVIRONMENT_FILE ENVIRONMENT_VALUE
             ENVIRONMENT_TOOL NORMALIZE_PATH ARTIFACT_INCLUDE EXCLUDE SET_ENV COMMAND)
  cmake_parse_arguments(PARSE_ARGV 1 S "" "${_single}" "${_multi}")

  if(S_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "strata_cache_command: unknown arguments: ${S_UNPARSED_ARGUMENTS}")
  endif()
  foreach(_required DOMAIN UNIT OUTPUT_DIR ENVIRONMENT_PROFILE COMMAND)
    if(NOT DEFINED S_${_required} OR "${S_${_required}}" STREQUAL "")
      message(FATAL_ERROR "strata_cache_command: ${_required} is required")
    endif()
  endforeach()
  if(NOT S_DOMAIN STREQUAL "third_party" AND NOT S_DOMAIN STREQUAL "custom_operator")
    message(FATAL_ERROR "strata_cache_command: DOMAIN must be third_party or custom_operator, got '${S_DOMAIN}'")
  endif()
  if(S_DOMAIN STREQUAL "custom_operator")
    foreach(_required OPERATOR_SOURCE PUBLISH_DIR PUBLISH_STATE_DIR SOC OPERATOR ACTION)
      if(NOT DEFINED S_${_required} OR "${S_${_required}}" STREQUAL "")
        message(FATAL_ERROR "strata_cache_command: DOMAIN custom_operator requires ${_required}")
      endif()
    endforeach()
    if(NOT S_REPO_ROOT)
      set(S_REPO_ROOT "${CMAKE_SOURCE_DIR}")
    endif()
  endif()
  if(NOT STRATA_EXECUTABLE OR NOT EXISTS "${STRATA_EXECUTABLE}")
    message(FATAL_ERROR "strata_cache_command: STRATA_EXECUTABLE ('${STRATA_EXECUTABLE}') does not exist; "
                        "build strata and pass -DSTRATA_EXECUTABLE=/path/to/strata")
  endif()

  foreach(_dir OUTPUT_DIR PUBLISH_DIR PUBLISH_STATE_DIR)
    if(DEFINED S_${_dir} AND NOT "${S_${_dir}}" STREQUAL "")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endforeach()
  foreach(_dir OPERATOR_SOURCE REPO_ROOT)
    if(DEFINED S_${_dir} AND NOT "${S_${_dir}}" STREQUAL "")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
  endforeach()
  foreach(_compiler CMAKE_C_COMPILER CMAKE_CXX_COMPILER)
    if(DEFINED ${_compiler} AND NOT "${${_compiler}}" STREQUAL "")
      list(APPEND S_ENVIRONMENT_TOOL "${${_compiler}}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES S_ENVIRONMENT_TOOL)

  set(_cmd "${STRATA_EXECUTABLE}" action run
      "--cache-root=${STRATA_CACHE_DIR}"
      "--domain=${S_DOMAIN}"
      "--unit=${S_UNIT}"
      "--output-dir=${S_OUTPUT_DIR}"
      "--environment-profile=${S_ENVIRONMENT_PROFILE}")
  foreach(_opt PUBLISH_DIR PUBLISH_STATE_DIR SOC OPERATOR ACTION OPERATOR_SOURCE REPO_ROOT)
    if(DEFINED S_${_opt} AND NOT "${S_${_opt}}" STREQUAL "")
      string(TOLOWER "${_opt}" _flag)
      string(REPLACE "_" "-" _flag "${_flag}")
      list(APPEND _cmd "--${_flag}=${S_${_opt}}")
    endif()
  endforeach()
  foreach(_opt PREPARED_INPUT RECIPE_FILE RECIPE_VALUE ENVIRONMENT_FILE ENVIRONMENT_VALUE
               ENVIRONMENT_TOOL)
    string(TOLOWER "${_opt}" _flag)
    string(REPLACE "_" "-" _flag "${_flag}")
    foreach(_value IN LISTS S_${_opt})
      if(_opt MATCHES "^(PREPARED_INPUT|RECIPE_FILE|ENVIRONMENT_FILE)$")
        get_filename_component(_value "${_value}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      endif()
      list(APPEND _cmd "--${_flag}=${_value}")
    endforeach()
  endforeach()
  list(APPEND _cmd "--normalize-path=${CMAKE_SOURCE_DIR}" "--normalize-path=${CMAKE_BINARY_DIR}")
  foreach(_value IN LISTS S_NORMALIZE_PATH)
    get_filename_component(_value "${_value}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND _cmd "--normalize-path=${_value}")
  endforeach()
  foreach(_value IN LISTS S_ARTIFACT_INCLUDE)
    list(APPEND _cmd "--artifact-include=${_value}")
  endforeach()
  foreach(_value IN LISTS S_EXCLUDE)
    list(APPEND _cmd "--exclude=${_value}")
  endforeach()
  foreach(_value IN LISTS S_SET_ENV)
    list(APPEND _cmd "--set-env=${_value}")
  endforeach()
  list(APPEND _cmd -- ${S_COMMAND})
  set(${out_var} "${_cmd}" PARENT_SCOPE)
endfunction()
