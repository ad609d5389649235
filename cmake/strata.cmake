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
#       [ENVIRONMENT_TOOL_CONTENT <tool>...]
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
#   STRATA_TOOL_CONTENT  ON: the project's compilers are also identified by content
#                      (ENVIRONMENT_TOOL_CONTENT: the digest of the driver and its back ends,
#                      strata's --environment-tool-content), not only by --version (default OFF)
#   STRATA_LAUNCHER    ON: include() calls strata_enable_launcher() (default OFF), so
#                      `cmake -DSTRATA_LAUNCHER=ON` turns the launcher on without editing
#                      CMakeLists.txt
#   STRATA_PREFIX_MAP  OFF: strata_enable_launcher() adds no -ffile-prefix-map options (default
#                      ON; see below), for a project whose objects must name their absolute
#                      paths
#
# Environment: STRATA_TOOLCHAIN_TOOLS (exported by actions/key: its toolchain-tools input)
# names the tools the CI snapshot key was computed from. When it is set, include() warns for
# each of the project's C and C++ compilers (CMAKE_C_COMPILER, CMAKE_CXX_COMPILER, resolved
# through symlinks) that is not one of those tools, e.g. a build with g++-13 whose key names
# `cc c++`: snapshots of that key would then be shared with builds of another compiler.
# Include the module after project(), so the compilers are known.
#
#   strata_enable_launcher([LANGUAGES <lang>...] [BASE_DIRS <dir>...] [NO_ARCHIVES]
#                          [NO_PREFIX_MAP])
#
# compiles every target created after it (in this directory and below) through strata's
# compiler launcher: CMAKE_<LANG>_COMPILER_LAUNCHER becomes
# `strata compile --cache-root ${STRATA_CACHE_DIR} --base-dir <dir>... --` for LANGUAGES
# (default C CXX). Unless NO_ARCHIVES is given, the same command is put in front of the
# archive rules (CMAKE_<LANG>_ARCHIVE_CREATE, _ARCHIVE_APPEND, _ARCHIVE_FINISH and their _IPO
# forms), so the `ar` and `ranlib` steps of static libraries are cached too. BASE_DIRS (default ${CMAKE_SOURCE_DIR} and ${CMAKE_BINARY_DIR}) are the
# directories whose absolute paths are made relative in keys, so a checkout or build tree at
# another path hits. With STRATA_TOOL_CONTENT ON the compilers are identified by content too.
# Unless NO_PREFIX_MAP is given or STRATA_PREFIX_MAP is OFF, it also adds the compile options
# of strata_prefix_map_options() (below) to the same targets, so that objects which embed
# their paths (__FILE__, assert, debug information) are the same in every checkout and hit
# there. Call it after project() and before the targets (docs/launcher.md).
#
#   strata_prefix_map_options(<out_var> [LANGUAGES <lang>...])
#
# sets <out_var> to the compile options strata_enable_launcher() adds (for add_compile_options
# or target_compile_options), e.g. to build without the launcher and get the same objects:
# `-ffile-prefix-map=${CMAKE_SOURCE_DIR}=.` and, when the build directory is another one,
# `-ffile-prefix-map=${CMAKE_BINARY_DIR}=.`, each inside `$<$<COMPILE_LANGUAGE:...>:...>` for
# the LANGUAGES (default C CXX) whose compiler takes it (GCC 8 and later, Clang 10 and later,
# AppleClang 12 and later; other compilers get none, with a status message). The shorter
# directory comes first, so the compiler (whose last matching map wins) writes a path under
# both relative to the deeper one. The compiler then writes `./src/a.c` for
# ${CMAKE_SOURCE_DIR}/src/a.c and `./gen/b.c` for ${CMAKE_BINARY_DIR}/gen/b.c in __FILE__,
# __builtin_FILE(), debug information (file names, DW_AT_comp_dir) and coverage notes; no
# name of either directory is left, so another checkout or build directory gets the same
# objects and keys.
#
# Relative OUTPUT_DIR, PUBLISH_DIR and PUBLISH_STATE_DIR are taken relative to
# ${CMAKE_CURRENT_BINARY_DIR}; relative OPERATOR_SOURCE, REPO_ROOT, PREPARED_INPUT,
# RECIPE_FILE, ENVIRONMENT_FILE and NORMALIZE_PATH relative to ${CMAKE_CURRENT_SOURCE_DIR}.
# A path that starts with a generator expression ($<TARGET_FILE:gen>) is passed as written
# and must evaluate to an absolute path.
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
option(STRATA_PREFIX_MAP
       "strata_enable_launcher() maps the source and build directories away in objects (-ffile-prefix-map)"
       ON)

# _strata_append(<list_var> <what> <value>): appends <value> to <list_var> as one element that
# every consumer of the returned list gives back unchanged: `COMMAND ${CMD}` in
# add_custom_command (VERBATIM), ExternalProject step commands, list(APPEND), foreach(IN
# LISTS). CMake splits a list at a `;` unless it follows a backslash or sits inside unbalanced
# `[`/`]`, and drops empty elements from `${CMD}`; so `;` becomes `$<SEMICOLON>`, an element
# whose square brackets do not balance gets an empty `$<0:...>` holding the missing
# brackets, one that ends in `\` or is empty gets an empty `$<0:>`, and so does every `]]` or
# `]=` between its two characters (ExternalProject quotes elements as `[==[...]==]`). Those generator
# expressions evaluate to `;` or to nothing when the custom command is generated, exactly as
# a literal `;` in a quoted argument of a plain add_custom_command would. A value that no
# generator can carry (a line break) is a configure error naming <what>.
function(_strata_append list_var what value)
  if(NOT value MATCHES "[];[\\\r\n]" AND NOT value STREQUAL "")
    # Nothing a list would change: the common case, kept fast.
    set(enc "${value}")
  else()
    _strata_encode(enc "${what}" "${value}")
  endif()
  if("${${list_var}}" STREQUAL "")
    set(${list_var} "${enc}" PARENT_SCOPE)
  else()
    set(${list_var} "${${list_var}};${enc}" PARENT_SCOPE)
  endif()
endfunction()

# _strata_encode(<out_var> <what> <value>): the element for <value> (see _strata_append).
function(_strata_encode out_var what value)
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
  set(${out_var} "${enc}" PARENT_SCOPE)
endfunction()

function(strata_cache_command out_var)
  set(_single DOMAIN UNIT SOC OPERATOR ACTION OPERATOR_SOURCE REPO_ROOT OUTPUT_DIR PUBLISH_DIR
              PUBLISH_STATE_DIR ENVIRONMENT_PROFILE)
  set(_multi PREPARED_INPUT RECIPE_FILE RECIPE_VALUE ENVIRONMENT_FILE ENVIRONMENT_VALUE
             ENVIRONMENT_TOOL ENVIRONMENT_TOOL_CONTENT NORMALIZE_PATH ARTIFACT_INCLUDE EXCLUDE
             SET_ENV COMMAND)
  set(_keywords ${_single} ${_multi})
  list(LENGTH _single _n_single)
  # Arguments are read one by one from ARGV<n>, never through a list, so a `;`, an empty
  # argument or an unbalanced bracket reaches the command as written. S_<single keyword> holds
  # its value as given; S_<list keyword> holds its values already encoded as list elements
  # (see _strata_encode; paths made absolute first). A keyword ends the previous one's
  # values, as in cmake_parse_arguments; a repeated list keyword adds to its values.
  foreach(_kw IN LISTS _keywords)
    set(S_${_kw} "")
  endforeach()
  set(_unparsed "")
  set(_current "")
  set(_current_single FALSE)
  set(_single_taken FALSE)
  math(EXPR _last "${ARGC} - 1")
  if(_last GREATER_EQUAL 1)
    foreach(_i RANGE 1 ${_last})
      set(_arg "${ARGV${_i}}")
      list(FIND _keywords "${_arg}" _k)
      if(_k GREATER -1)
        set(_current "${_arg}")
        set(_single_taken FALSE)
        if(_k LESS _n_single)
          set(_current_single TRUE)
        else()
          set(_current_single FALSE)
        endif()
        continue()
      endif()
      if(_current STREQUAL "" OR _single_taken)
        string(APPEND _unparsed " '${_arg}'")
        continue()
      endif()
      if(_current_single)
        set(S_${_current} "${_arg}")
        set(_single_taken TRUE)
        continue()
      endif()
      if(_current MATCHES "^(PREPARED_INPUT|RECIPE_FILE|ENVIRONMENT_FILE|NORMALIZE_PATH|ENVIRONMENT_TOOL|ENVIRONMENT_TOOL_CONTENT)$")
        if(_arg STREQUAL "")
          list(LENGTH S_${_current} _n)
          message(FATAL_ERROR "strata_cache_command: ${_current} argument ${_n} is empty; "
                              "name a file, directory or tool (an empty path would mean the "
                              "whole current directory)")
        endif()
        # A path that starts with a generator expression ($<TARGET_FILE:gen>) is known only
        # when the build system is generated: it is passed as written and must evaluate to
        # an absolute path, as it must in a plain custom command's DEPENDS.
        if(NOT _current MATCHES "^ENVIRONMENT_TOOL" AND NOT _arg MATCHES "^\\$<")
          get_filename_component(_arg "${_arg}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        endif()
      elseif(_current STREQUAL "SET_ENV" AND NOT _arg MATCHES "^[^=]+=")
        message(FATAL_ERROR "strata_cache_command: SET_ENV '${_arg}' is not NAME=VALUE "
                            "(a non-empty name, then `=`, then the value, which may be empty)")
      endif()
      if(_arg MATCHES "[];[\\\r\n]" OR _arg STREQUAL "")
        list(LENGTH S_${_current} _n)
        _strata_encode(_arg "${_current} argument ${_n}" "${_arg}")
      endif()
      list(APPEND S_${_current} "${_arg}")
    endforeach()
  endif()

  if(NOT _unparsed STREQUAL "")
    message(FATAL_ERROR "strata_cache_command: unknown arguments:${_unparsed}")
  endif()
  foreach(_required DOMAIN UNIT OUTPUT_DIR ENVIRONMENT_PROFILE COMMAND)
    if("${S_${_required}}" STREQUAL "")
      message(FATAL_ERROR "strata_cache_command: ${_required} is required")
    endif()
  endforeach()
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

  foreach(_dir OUTPUT_DIR PUBLISH_DIR PUBLISH_STATE_DIR)
    if(NOT "${S_${_dir}}" STREQUAL "" AND NOT "${S_${_dir}}" MATCHES "^\\$<")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endforeach()
  foreach(_dir OPERATOR_SOURCE REPO_ROOT)
    if(NOT "${S_${_dir}}" STREQUAL "" AND NOT "${S_${_dir}}" MATCHES "^\\$<")
      get_filename_component(S_${_dir} "${S_${_dir}}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
  endforeach()
  # The project's compilers are tools too (one already given is not repeated).
  foreach(_compiler CMAKE_C_COMPILER CMAKE_CXX_COMPILER)
    if(NOT "${${_compiler}}" STREQUAL "")
      set(_tools "")
      _strata_append(_tools "${_compiler}" "${${_compiler}}")
      list(FIND S_ENVIRONMENT_TOOL "${_tools}" _k)
      if(_k EQUAL -1)
        list(APPEND S_ENVIRONMENT_TOOL "${_tools}")
      endif()
      if(STRATA_TOOL_CONTENT)
        list(FIND S_ENVIRONMENT_TOOL_CONTENT "${_tools}" _k)
        if(_k EQUAL -1)
          list(APPEND S_ENVIRONMENT_TOOL_CONTENT "${_tools}")
        endif()
      endif()
    endif()
  endforeach()

  # Single values go through _strata_append, list values are encoded already, so the list
  # holds exactly these arguments.
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
               ENVIRONMENT_TOOL ENVIRONMENT_TOOL_CONTENT NORMALIZE_PATH ARTIFACT_INCLUDE EXCLUDE
               SET_ENV)
    string(TOLOWER "${_opt}" _flag)
    string(REPLACE "_" "-" _flag "${_flag}")
    if(_opt STREQUAL "NORMALIZE_PATH")
      _strata_append(_cmd "CMAKE_SOURCE_DIR" "--normalize-path=${CMAKE_SOURCE_DIR}")
      _strata_append(_cmd "CMAKE_BINARY_DIR" "--normalize-path=${CMAKE_BINARY_DIR}")
    endif()
    # `--flag=` followed by an encoded value is the encoding of `--flag=value`.
    foreach(_value IN LISTS S_${_opt})
      list(APPEND _cmd "--${_flag}=${_value}")
    endforeach()
  endforeach()
  list(APPEND _cmd -- ${S_COMMAND})
  set(${out_var} "${_cmd}" PARENT_SCOPE)
endfunction()

# strata_prefix_map_options(<out_var> [LANGUAGES <lang>...]): see the top of this file.
function(strata_prefix_map_options out_var)
  cmake_parse_arguments(_arg "" "" "LANGUAGES" ${ARGN})
  if(_arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "strata_prefix_map_options: unknown arguments ${_arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT _arg_LANGUAGES)
    set(_arg_LANGUAGES C CXX)
  endif()
  get_filename_component(_src "${CMAKE_SOURCE_DIR}" ABSOLUTE)
  get_filename_component(_bin "${CMAKE_BINARY_DIR}" ABSOLUTE)
  if(_src MATCHES "=" OR _bin MATCHES "=")
    # The compiler splits `-ffile-prefix-map=<old>=<new>` at the first `=`.
    message(STATUS "strata: no -ffile-prefix-map: '${_src}' or '${_bin}' contains '=', which "
                   "the option cannot carry; objects that embed paths hit only at the same path")
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  # Both become `.`: a name of the build directory in the objects (or in the keys, which
  # hold the maps) would make another build directory of the same checkout miss.
  set(_maps "${_src}=.")
  if(NOT _bin STREQUAL _src)
    string(LENGTH "${_src}" _n_src)
    string(LENGTH "${_bin}" _n_bin)
    # The compiler takes the last map that matches: the deeper directory goes last.
    if(_n_bin LESS _n_src)
      set(_maps "${_bin}=." "${_src}=.")
    else()
      list(APPEND _maps "${_bin}=.")
    endif()
  endif()
  set(_langs "")
  foreach(_lang IN LISTS _arg_LANGUAGES)
    set(_id "${CMAKE_${_lang}_COMPILER_ID}")
    set(_version "${CMAKE_${_lang}_COMPILER_VERSION}")
    if((_id STREQUAL "GNU" AND _version VERSION_GREATER_EQUAL 8)
       OR (_id STREQUAL "Clang" AND _version VERSION_GREATER_EQUAL 10)
       OR (_id STREQUAL "AppleClang" AND _version VERSION_GREATER_EQUAL 12))
      list(APPEND _langs "${_lang}")
    elseif(NOT _id STREQUAL "")
      message(STATUS "strata: no -ffile-prefix-map for ${_lang}: ${_id} ${_version} does not "
                     "take it (GCC >= 8, Clang >= 10); objects that embed paths hit only at "
                     "the same path")
    endif()
  endforeach()
  set(_options "")
  if(_langs)
    string(REPLACE ";" "," _langs "${_langs}")
    foreach(_map IN LISTS _maps)
      list(APPEND _options "$<$<COMPILE_LANGUAGE:${_langs}>:-ffile-prefix-map=${_map}>")
    endforeach()
  endif()
  set(${out_var} "${_options}" PARENT_SCOPE)
endfunction()

# strata_enable_launcher([LANGUAGES <lang>...] [BASE_DIRS <dir>...] [NO_ARCHIVES]
# [NO_PREFIX_MAP]): see the top of this file.
macro(strata_enable_launcher)
  cmake_parse_arguments(_strata_l "NO_ARCHIVES;NO_PREFIX_MAP" "" "LANGUAGES;BASE_DIRS" ${ARGN})
  if(_strata_l_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "strata_enable_launcher: unknown arguments ${_strata_l_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT STRATA_EXECUTABLE OR STRATA_EXECUTABLE MATCHES "-NOTFOUND$")
    message(FATAL_ERROR "strata_enable_launcher: no strata executable; set -DSTRATA_EXECUTABLE=<path> or put strata on PATH")
  endif()
  if(NOT _strata_l_LANGUAGES)
    set(_strata_l_LANGUAGES C CXX)
  endif()
  if(NOT _strata_l_BASE_DIRS)
    set(_strata_l_BASE_DIRS "${CMAKE_SOURCE_DIR}" "${CMAKE_BINARY_DIR}")
  endif()
  set(_strata_l_cmd "${STRATA_EXECUTABLE}" compile "--cache-root=${STRATA_CACHE_DIR}")
  foreach(_strata_l_dir IN LISTS _strata_l_BASE_DIRS)
    get_filename_component(_strata_l_dir "${_strata_l_dir}" ABSOLUTE)
    list(APPEND _strata_l_cmd "--base-dir=${_strata_l_dir}")
  endforeach()
  if(STRATA_TOOL_CONTENT)
    list(APPEND _strata_l_cmd --tool-content)
  endif()
  list(APPEND _strata_l_cmd --)
  # The archive rules are command strings, not lists: each word of the command quoted.
  set(_strata_l_rule "")
  foreach(_strata_l_word IN LISTS _strata_l_cmd)
    string(APPEND _strata_l_rule "\"${_strata_l_word}\" ")
  endforeach()
  foreach(_strata_l_lang IN LISTS _strata_l_LANGUAGES)
    set(CMAKE_${_strata_l_lang}_COMPILER_LAUNCHER "${_strata_l_cmd}")
    if(NOT _strata_l_NO_ARCHIVES)
      foreach(_strata_l_var ARCHIVE_CREATE ARCHIVE_APPEND ARCHIVE_FINISH
                            ARCHIVE_CREATE_IPO ARCHIVE_APPEND_IPO ARCHIVE_FINISH_IPO)
        set(_strata_l_name CMAKE_${_strata_l_lang}_${_strata_l_var})
        # Each command of the rule (a list) gets the prefix once: calling the macro again
        # changes nothing.
        if(DEFINED ${_strata_l_name} AND NOT "${${_strata_l_name}}" STREQUAL "")
          set(_strata_l_rules "")
          foreach(_strata_l_one IN LISTS ${_strata_l_name})
            # Only a command that runs the archiver or ranlib CMake found (not `:` where a
            # platform has no ranlib).
            # CMake writes the tool as a placeholder (`<CMAKE_AR> qc …`) or, in the _IPO rules
            # of GNU and Clang, as its path already filled in (`"/usr/bin/gcc-ar-12" cr …`).
            set(_strata_l_tool "")
            if(_strata_l_one MATCHES "^\"?<(CMAKE_(${_strata_l_lang}_COMPILER_)?(AR|RANLIB))>\"? ")
              set(_strata_l_tool "${${CMAKE_MATCH_1}}")
            else()
              foreach(_strata_l_known CMAKE_${_strata_l_lang}_COMPILER_AR CMAKE_${_strata_l_lang}_COMPILER_RANLIB CMAKE_AR CMAKE_RANLIB)
                set(_strata_l_path "${${_strata_l_known}}")
                if(NOT _strata_l_path STREQUAL "")
                  string(FIND "${_strata_l_one}" "\"${_strata_l_path}\" " _strata_l_at_quoted)
                  string(FIND "${_strata_l_one}" "${_strata_l_path} " _strata_l_at)
                  if(_strata_l_at_quoted EQUAL 0 OR _strata_l_at EQUAL 0)
                    set(_strata_l_tool "${_strata_l_path}")
                    break()
                  endif()
                endif()
              endforeach()
            endif()
            if(_strata_l_tool AND NOT _strata_l_tool STREQUAL ":" AND NOT _strata_l_tool MATCHES "-NOTFOUND$")
              set(_strata_l_one "${_strata_l_rule}${_strata_l_one}")
            endif()
            list(APPEND _strata_l_rules "${_strata_l_one}")
          endforeach()
          set(${_strata_l_name} "${_strata_l_rules}")
        endif()
      endforeach()
    endif()
  endforeach()
  set(_strata_l_maps "")
  if(STRATA_PREFIX_MAP AND NOT _strata_l_NO_PREFIX_MAP)
    strata_prefix_map_options(_strata_l_maps LANGUAGES ${_strata_l_LANGUAGES})
    add_compile_options(${_strata_l_maps})
  endif()
  # Said for the languages the project has enabled (the launcher is set for the others too,
  # for an enable_language() later).
  get_property(_strata_l_enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(_strata_l_said "")
  foreach(_strata_l_lang IN LISTS _strata_l_LANGUAGES)
    # list(FIND), not IN_LIST: a project's old cmake_minimum_required() leaves CMP0057 OLD.
    list(FIND _strata_l_enabled "${_strata_l_lang}" _strata_l_at)
    if(NOT _strata_l_at EQUAL -1)
      list(APPEND _strata_l_said "${_strata_l_lang}")
    endif()
  endforeach()
  if(NOT _strata_l_said)
    set(_strata_l_said "${_strata_l_LANGUAGES}")
  endif()
  string(REPLACE ";" ", " _strata_l_said "${_strata_l_said}")
  if(_strata_l_maps)
    message(STATUS "strata: compiler launcher on for ${_strata_l_said} (cache ${STRATA_CACHE_DIR}); "
                   "${CMAKE_SOURCE_DIR} and ${CMAKE_BINARY_DIR} are mapped to relative paths in objects "
                   "(-ffile-prefix-map; NO_PREFIX_MAP or -DSTRATA_PREFIX_MAP=OFF turns that off)")
  else()
    message(STATUS "strata: compiler launcher on for ${_strata_l_said} (cache ${STRATA_CACHE_DIR})")
  endif()
endmacro()

# _strata_check_toolchain(): the STRATA_TOOLCHAIN_TOOLS warning (see the top of this file).
# A tool is a name looked up on PATH, as the key action runs it, or a path; both sides are
# compared as real paths, so `c++` and the `/usr/bin/g++-12` it links to are one compiler.
function(_strata_check_toolchain)
  if("$ENV{STRATA_TOOLCHAIN_TOOLS}" STREQUAL "")
    return()
  endif()
  string(REGEX REPLACE "[ \t\r\n]+" ";" _tools "$ENV{STRATA_TOOLCHAIN_TOOLS}")
  set(_real "")
  foreach(_tool IN LISTS _tools)
    if(_tool STREQUAL "")
      continue()
    endif()
    if(_tool MATCHES "/")
      set(_path "${_tool}")
    else()
      unset(_strata_tool_path CACHE)
      find_program(_strata_tool_path NAMES "${_tool}")
      set(_path "${_strata_tool_path}")
      unset(_strata_tool_path CACHE)
    endif()
    if(_path AND NOT _path MATCHES "-NOTFOUND$")
      get_filename_component(_path "${_path}" REALPATH)
      list(APPEND _real "${_path}")
    endif()
  endforeach()
  foreach(_lang C CXX)
    set(_compiler "${CMAKE_${_lang}_COMPILER}")
    if(_compiler STREQUAL "")
      continue()
    endif()
    get_filename_component(_compiler_real "${_compiler}" REALPATH)
    list(FIND _real "${_compiler_real}" _k)
    if(_k EQUAL -1)
      string(CONCAT _msg
             "this project compiles ${_lang} with ${_compiler} (${_compiler_real}), which is "
             "not among the tools the snapshot key names (STRATA_TOOLCHAIN_TOOLS: "
             "'$ENV{STRATA_TOOLCHAIN_TOOLS}', the toolchain-tools input of actions/key), so "
             "this build's snapshots share a namespace with other compilers' builds; add "
             "${_compiler} to toolchain-tools")
      message(WARNING "strata: ${_msg}")
      if("$ENV{GITHUB_ACTIONS}" STREQUAL "true")
        message(NOTICE "::warning title=strata toolchain-tools::${_msg}")
      endif()
    endif()
  endforeach()
endfunction()
_strata_check_toolchain()

option(STRATA_LAUNCHER "Compile C and C++ through the strata compiler launcher" OFF)
if(STRATA_LAUNCHER)
  strata_enable_launcher()
endif()
