file(REMOVE_RECURSE
  "libesmtrain_internal.a"
)
