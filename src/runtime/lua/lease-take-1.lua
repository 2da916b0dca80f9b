--[[
  Takes a shard lease from a holder whose membership has lapsed (it stopped
  heartbeating): only while the lease still names that holder, so two
  workers taking it at once cannot both get it.

  KEYS[1]  the lease key
  ARGV[1]  the holder seen (whose membership lapsed)
  ARGV[2]  the taking node's id
  ARGV[3]  time to live in ms

  Returns 1 when taken, 0 when the lease names another node now.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
  return 1
end
return 0
