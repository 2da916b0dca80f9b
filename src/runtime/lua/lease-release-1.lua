--[[
  Releases a shard lease, but only for its holder.

  KEYS[1]  the lease key
  ARGV[1]  the holder's node id

  Returns 1 when released, 0 when it was not held by this node.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
