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
# <out_var> receives the wrapped command as a list, ready for
# add_custom_command(COMMAND ${<out_var>} ... VERBATIM) or ExternalProject's
# BUILD_COMMAND ${<out_var>}. Every argument reaches strata and the command exactly as a plain
# add_custom_command(... VERBATIM) would pass it: `;`, empty arguments, spaces, quotes,
# backslashes, `$`, `#`, square brackets and generator expressions (evaluated when the build
# system is generated, as in a plain custom command). To keep them through a list, `;` is
# stored as `$<SEMICOLON>` and an element that is empty, ends in `\` or has unbalanced square
# brackets carries an empty `$<0:...>`; use the list only where generator expressions are
# evaluated (add_custom_command, add_custom_target, ExternalProject step commands). An
# argument with a line break, which no generator can pass, a SET_ENV entry that is not
# NAME=VALUE and an empty path stop the configure step. Keywords end the COMMAND list as in
# cmake_parse_arguments, and add_custom_command's own keywords (DEPENDS, ...) inside COMMAND
# act on the expanded list as they would in a plain custom command.
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

# _strata_append(<list_var> <what> <value>): appends <value> to <list_var> as one element that
# every consumer of the returned list gives back unchanged: `COMMAND ${CMD}` in
# add_custom_command (VERBATIM), ExternalProject step commands, list(APPEND), foreach(IN
# LISTS). CMake splits a list at a `;` unless it follows a backslash or sits inside unbalanced
# `[`/`]`, and drops empty elements from `${CMD}`; so `;` becomes `$<SEMICOLON>`, an element
# whose square brackets do not balance gets an empty `$<0:...>` holding the missing
# brackets, and one that ends in `\` or is empty gets an empty `$<0:>`. Those generator
# expressions evaluate to `;` or to nothing when the custom command is generated, exactly as
# a literal `;` in a quoted argument of a plain add_custom_command would. A value that no
# generator can carry (a line break) is a configure error naming <what>.
function(_strata_append list_var what value)
  if(value MATCHES "[\r\n]")
    message(FATAL_ERROR "strata_cache_command: ${what} contains a line break, which no CMake "
                        "generator passes to a command as one argument; write the text to a "
                        "file and pass the file name instead")
  endif()
  string(REPLACE ";" "$<SEMICOLON>" enc "${value}")
  # ExternalProject quotes each element as a bracket argument `[==[...]==]`: a `]]` or `]=`
  # inside could close it, so an empty expression goes between.
  while(enc MATCHES "\\][]=]")
    string(REGEX REPLACE "\\]([]=])" "]$<0:>\\1" enc "${enc}")
  endwhile()
  string(REGEX REPLACE "[^[]" "" opens "${enc}")
  string(REGEX REPLACE "[^]]" "" closes "${enc}")
  string(LENGTH "${opens}" n_open)
  string(LENGTH "${closes}" n_close)
  while(n_open GREATER n_close)
    string(APPEND enc "$<0:]>")
    math(EXPR n_close "${n_close} + 1")
  endwhile()
  while(n_close GREATER n_open)
    string(APPEND enc "$<0:[>")
    math(EXPR n_open "${n_open} + 1")
  endwhile()
  if(enc STREQUAL "" OR enc MATCHES "\\\\$")
    string(APPEND enc "$<0:>")
  endif()
  set(list "${${list_var}}")
  list(APPEND list "${enc}")
  set(${list_var} "${list}" PARENT_SCOPE)
endfunction()

function(strata_cache_command out_var)
  set(_single DOMAIN UNIT SOC OPERATOR ACTION OPERATOR_SOURCE REPO_ROOT OUTPUT_DIR PUBLISH_DIR
              PUBLISH_STATE_DIR ENVIRONMENT_PROFILE)
  set(_multi PREPARED_INPUT RECIPE_FILE RECIPE_VALUE ENVIRONMENT_FILE ENVIRONMENT_VALUE
             ENVIRONMENT_TOOL NORMALIZE_PATH ARTIFACT_INCLUDE EXCLUDE SET_ENV COMMAND)
  # Arguments are read one by one from ARGV<n>, never through a list, so a `;`, an empty
  # argument or an unbalanced bracket reaches the command as written. Each keyword's values
  # are kept in S_<KEYWORD>_<i> (count in S_<KEYWORD>_N); a keyword ends the previous one's
  # values, as in cmake_parse_arguments.
  foreach(_kw IN LISTS _single _multi)
    set(S_${_kw}_N 0)
  endforeach()
  set(_unparsed "")
  set(_current "")
  math(EXPR _last "${ARGC} - 1")
  if(_last GREATER_EQUAL 1)
    foreach(_i RANGE 1 ${_last})
      set(_arg "${ARGV${_i}}")
      list(FIND _single "${_arg}" _is_single)
      list(FIND _multi "${_arg}" _is_multi)
      if(_is_single GREATER -1 OR _is_multi GREATER -1)
        set(_current "${_arg}")
        if(_is_single GREATER -1)
          set(S_${_arg}_N 0)
        endif()
        continue()
      endif()
      list(FIND _single "${_current}" _cur_single)
      if(_current STREQUAL "" OR (_cur_single GREATER -1 AND S_${_current}_N EQUAL 1))
        string(APPEND _unparsed " '${_arg}'")
        continue()
      endif()
      set(S_${_current}_${S_${_current}_N} "${_arg}")
      math(EXPR S_${_current}_N "${S_${_current}_N} + 1")
    endforeach()
  endif()
  foreach(_kw IN LISTS _single)
    if(S_${_kw}_N EQUAL 1)
      set(S_${_kw} "${S_${_kw}_0}")
    else()
      set(S_${_kw} "")
    endif()
  endforeach()

  if(NOT _unparsed STREQUAL "")
    message(FATAL_ERROR "strata_cache_command: unknown arguments:${_unparsed}")
  endif()
  foreach(_required DOMAIN UNIT OUTPUT_DIR ENVIRONMENT_PROFILE)
    if("${S_${_required}}" STREQUAL "")
      message(FATAL_ERROR "strata_cache_command: ${_required} is required")
    endif()
  endforeach()
  if(S_COMMAND_N EQUAL 0)
    message(FATAL_ERROR "strata_cache_command: COMMAND is required")
  endif()
  if(NOT S_DOMAIN STREQUAL "third_party" AND NOT S_DOMAIN STREQUAL "custom_operator")
    message(FATAL_ERROR "strata_cache_command: DOMAIN must be third_party or custom_operator, got '${S_DOMAIN}'")
  endif()
  if(S_DOMAIN STREQUAL "custom_operator")
    foreach(_required OPERATOR_SOURCE PUBLISH_DIR PUBLISH_STATE_DIR SOC OPERATOR ACTION)
      if("${S_${_required}}" STREQUAL "")
        message(FATAL_ERROR "strata_cache_command: DOMAIN custom_operator requires ${_required}")
      endif()
    endforeach()
    if("${S_REPO_ROOT}" STREQUAL "")
      set(S_REPO_ROOT "${CMAKE_SOURCE_DIR}")
    endif()
  endif()
  if(NOT STRATA_EXECUTABLE OR NOT EXISTS "${STRATA_EXECUTABLE}")
    message(FATAL_ERROR "strata_cache_command: STRATA_EXECUTABLE ('${STRATA_EXECUTABLE}') does not exist; "
                        "build strata and pass -DSTRATA_EXECUTABLE=/path/to/strata")
  endif()
  if(S_SET_ENV_N GREATER 0)
    math(EXPR _last "${S_SET_ENV_N} - 1")
    foreach(_i RANGE 0 ${_last})
      if(NOT S_SET_ENV_${_i} MATCHES "^[^=]+=")
        message(FATAL_ERROR "strata_cache_command: SET_ENV '${S_SET_ENV_${_i}}' is not NAME=VALUE "
                            "(a non-empty name, then `=`, then the value, which may be empty)")
      endif()
    endforeach()
  endif()

  foreach(_opt PREPARED_INPUT RECIPE_FILE ENVIRONMENT_FILE ENVIRONMENT_TOOL NORMALIZE_PATH)
    if(S_${_opt}_N GREATER 0)
      math(EXPR _last "${S_${_opt}_N} - 1")
      foreach(_i RANGE 0 ${_last})
        if("${S_${_opt}_${_i}}" STREQUAL "")
          message(FATAL_ERROR "strata_cache_command: ${_opt} argument ${_i} is empty; "
                              "name a file, directory or tool (an empty path would mean the "
                              "whole current directory)")
        endif()
      endforeach()
    endif()
  endforeach()

  foreach(_dir OUTPUT_DIR PUBLISH_DIR PUBLISH_STATE_DIR)
    if(NOT "${S_${_dir}}" STREQUAL "")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endforeach()
  foreach(_dir OPERATOR_SOURCE REPO_ROOT)
    if(NOT "${S_${_dir}}" STREQUAL "")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
  endforeach()
  # The project's compilers are tools too (duplicates of an explicit tool are skipped).
  foreach(_compiler CMAKE_C_COMPILER CMAKE_CXX_COMPILER)
    if(NOT "${${_compiler}}" STREQUAL "")
      set(_dup FALSE)
      if(S_ENVIRONMENT_TOOL_N GREATER 0)
        math(EXPR _last "${S_ENVIRONMENT_TOOL_N} - 1")
        foreach(_i RANGE 0 ${_last})
          if(S_ENVIRONMENT_TOOL_${_i} STREQUAL "${${_compiler}}")
            set(_dup TRUE)
          endif()
        endforeach()
      endif()
      if(NOT _dup)
        set(S_ENVIRONMENT_TOOL_${S_ENVIRONMENT_TOOL_N} "${${_compiler}}")
        math(EXPR S_ENVIRONMENT_TOOL_N "${S_ENVIRONMENT_TOOL_N} + 1")
      endif()
    endif()
  endforeach()

  # Every element goes through _strata_append, so the list holds exactly these arguments.
  set(_cmd "")
  _strata_append(_cmd "STRATA_EXECUTABLE" "${STRATA_EXECUTABLE}")
  list(APPEND _cmd action run)
  _strata_append(_cmd "STRATA_CACHE_DIR" "--cache-root=${STRATA_CACHE_DIR}")
  foreach(_opt DOMAIN UNIT OUTPUT_DIR ENVIRONMENT_PROFILE PUBLISH_DIR PUBLISH_STATE_DIR SOC
               OPERATOR ACTION OPERATOR_SOURCE REPO_ROOT)
    if(NOT "${S_${_opt}}" STREQUAL "")
      string(TOLOWER "${_opt}" _flag)
      string(REPLACE "_" "-" _flag "${_flag}")
      _strata_append(_cmd "${_opt}" "--${_flag}=${S_${_opt}}")
    endif()
  endforeach()
  foreach(_opt PREPARED_INPUT RECIPE_FILE RECIPE_VALUE ENVIRONMENT_FILE ENVIRONMENT_VALUE
               ENVIRONMENT_TOOL NORMALIZE_PATH ARTIFACT_INCLUDE EXCLUDE SET_ENV)
    string(TOLOWER "${_opt}" _flag)
    string(REPLACE "_" "-" _flag "${_flag}")
    if(_opt STREQUAL "NORMALIZE_PATH")
      _strata_append(_cmd "CMAKE_SOURCE_DIR" "--normalize-path=${CMAKE_SOURCE_DIR}")
      _strata_append(_cmd "CMAKE_BINARY_DIR" "--normalize-path=${CMAKE_BINARY_DIR}")
    endif()
    if(S_${_opt}_N GREATER 0)
      math(EXPR _last "${S_${_opt}_N} - 1")
      foreach(_i RANGE 0 ${_last})
        set(_value "${S_${_opt}_${_i}}")
        if(_opt MATCHES "^(PREPARED_INPUT|RECIPE_FILE|ENVIRONMENT_FILE|NORMALIZE_PATH)$")
          get_filename_component(_value "${_value}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        endif()
        _strata_append(_cmd "${_opt} argument ${_i}" "--${_flag}=${_value}")
      endforeach()
    endif()
  endforeach()
  list(APPEND _cmd --)
  math(EXPR _last "${S_COMMAND_N} - 1")
  foreach(_i RANGE 0 ${_last})
    _strata_append(_cmd "COMMAND argument ${_i}" "${S_COMMAND_${_i}}")
  endforeach()
  set(${out_var} "${_cmd}" PARENT_SCOPE)
endfunction()
