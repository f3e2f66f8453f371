-- kick: wakes a client's wake-up thread, whose BRPOP includes KEYS[1] first, so that its next
-- BRPOP includes a newly queued waiter's wake list.
--
-- KEYS: 1 the kick list.  ARGV: 1 how long an unpopped kick may stay, in ms.
-- Returns: 1. The list is popped at once by the BRPOP it wakes; the TTL only clears it when the
-- client is gone.
--
-- Run on its own: redis-cli --eval src/lua/kick.lua fairsem:{demo}:wake:kick-1 , 60000
redis.call('LPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
