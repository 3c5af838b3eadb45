// Package autoscale is the one scaling rule of a sluice vertex: how many
// replicas its backlog needs, never more than its rate limit lets through.
// `vertex simulate --autoscale` runs it on a simulated clock; a scaler for
// KEDA or a metric for the HPA asks it the same way.
//
// # The rule
//
// A [Scaler] is given an [Observation] of a vertex at each interval: its
// replicas, what is pending, the rate they process, and each rate limit
// its messages pass ([Limit]: the vertex's own, a shared group's or a
// region's, each with its own pool). [Scaler.Decide] answers a [Decision]:
// the replicas that drain the backlog within the target processing time at
// the rate of one replica, capped at the replicas the current pool keeps
// busy (the ramp's pool now, not the limit's max), plus one replica of
// headroom while that pool ramps up, within min and max, a few at a time
// and never within a cool-down of the last change. A replica added to a
// vertex held at its limit adds cost and no throughput; one removed during
// a ramp slows the ramp.
//
// A vertex paused by a throttle signal does not scale up for the backlog
// the pause leaves, and one whose pool the closed loop cut holds its count
// for a lookback. A vertex with no replica (scaled to zero, a pipeline
// resumed after a pause) starts from min replicas, at least one when
// something is pending, and its ramp's pool caps it from there.
//
// # Settings
//
// [Config] holds Numaflow's scale fields, read as Numaflow defines them
// ([DefaultConfig] is Numaflow's defaults), and the rate of one replica
// where it is known; left at 0 the Scaler learns it from the replicas'
// rate when they are busy and not throttled. [Config.Validate] names the
// first field out of range ([RangeError]); package vertexconfig makes a
// Config of a vertex's scale block.
//
// # Time
//
// The Scaler reads time from its clock ([WithClock]): the lookback and the
// cool-downs are exact on a manual clock.
package autoscale
