--[[
  GCRA rate limit: `count` requests against one budget, decided atomically
  with the Redis clock so every frontend shares one view of time. Requests
  that waited side by side on one frontend are decided in one call, in
  order: the first ones pass while the budget allows, the rest are refused.

  KEYS[1]  the budget's key (holds the theoretical arrival time, ms)
  ARGV[1]  emission interval in ms (60000 / requests per minute)
  ARGV[2]  burst: how many requests may pass at once
  ARGV[3]  how many requests (1 when absent)

  Returns {allowed, startMs}: how many of them passed, and the theoretical
  arrival time before the first, less now (ms, at least 0). Each request's
  figures follow from those two (rate-limiter.ts).
]]
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local count = tonumber(ARGV[3] or '1')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local start = tat
local tolerance = interval * burst
local allowed = 0
while allowed < count and now >= tat + interval - tolerance do
  tat = tat + interval
  allowed = allowed + 1
end

if allowed > 0 then
  redis.call('SET', KEYS[1], tat, 'PX', math.ceil(tat - now) + 1000)
end
return {allowed, math.floor(start - now)}
