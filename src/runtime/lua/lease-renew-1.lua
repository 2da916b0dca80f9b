--[[
  Renews a shard lease, but only for its holder.

  KEYS[1]  the lease key
  ARGV[1]  the holder's node id
  ARGV[2]  new time to live in ms

  Returns 1 when renewed, 0 when the lease is gone or held by another node.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
