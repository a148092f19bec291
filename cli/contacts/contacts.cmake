# SPDX-License-Identifier: MIT
# `contacts`: contact maps (and a trained contact head) through the public API.
target_sources(esmtrain-example PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_contacts.c
               ${CMAKE_CURRENT_LIST_DIR}/contacts_train.c
               ${CMAKE_CURRENT_LIST_DIR}/contacts_png.c)
