--[[
  GCRA rate limit: one request against one budget, decided atomically with
  the Redis clock so every frontend shares one view of time.

  KEYS[1]  the budget's key (holds the theoretical arrival time, ms)
  ARGV[1]  emission interval in ms (60000 / requests per minute)
  ARGV[2]  burst: how many requests may pass at once

  Returns {allowed (1|0), remaining, resetMs, retryAfterMs}
    resetMs       ms until the whole burst is available again
    retryAfterMs  ms until this request would pass (0 when allowed)
]]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local newTat = tat + interval
local tolerance = interval * burst
local allowAt = newTat - tolerance

if now < allowAt then
  local remaining = 0
  return {0, remaining, tat - now, allowAt - now}
end

redis.call('SET', KEYS[1], newTat, 'PX', math.ceil(newTat - now) + 1000)
local remaining = math.floor((tolerance - (newTat - now)) / interval)
return {1, remaining, newTat - now, 0}
