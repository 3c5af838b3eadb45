package simulate

// Usage is the help of vertex simulate: what it runs and prints, before
// the list of its flags.
func Usage() string {
	return `usage: vertex simulate (--max N | -f FILE) --demand LIST [flags]

Runs the real rate limiter on a simulated clock, one epoch (second) per entry of
--demand, and prints per epoch the pool and the tokens granted. -f takes the rate
limit from a MonoVertex or Pipeline YAML (the pipeline's, or --vertex's); flags
given with it override its fields. --signals adds throttle signals, as a
downstream answering 429 would send them, and turns adaptive throttling on.
--change K:FILE replays a live change of the config to FILE's rate limit
(its ` + LiveSettings() + `), as vertex run applies it:
epoch K is the first under it; give it once per change.
--quota replays a downstream with a quota, fixed:RATE (a fixed window of RATE
requests a second) or bucket:RATE:BURST (a token bucket), that takes the tokens
granted at each epoch's start and signals when it refuses some (with
--retry-after as its Retry-After); --quota-change K:RATE changes its rate from
epoch K. It turns adaptive throttling on, and the table shows what it accepted
and refused per epoch.
--autoscale scales the replicas (of --replica-rate each) by sluice's scaling rule;
--demand is then the messages arriving per epoch.

With --group NAME and -f PIPELINE, it runs the vertices of PIPELINE that
join the shared limit NAME (rateLimit.groups), one replica each, with the
demand of each given by --demand-of VERTEX=LIST (a vertex without one is
idle), and prints per epoch the group's pool, what each vertex sent, and
the group's tokens lent and borrowed.

flags:
`
}
