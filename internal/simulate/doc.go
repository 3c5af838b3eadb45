// Package simulate shows what the rate limiter does on a simulated clock, as
// `vertex simulate` prints it.
//
// # Simulating
//
// A [Simulation] is a rate limit's [ratelimit.Config] and a
// [Scenario]: the tokens asked in each epoch (a second;
// [ParseDemand] reads "10,20,,60"), the throttle signals after each epoch's
// call ([ParseSignals] reads "0,1,2s") and the live changes of the limit,
// each from an epoch on. [Simulation.Write] runs the real limiter on a
// manual clock ([Simulate]) and writes its epochs.
//
// # Output
//
// Epochs go out as a table ([WriteTable]: the config on one line, then epoch,
// pool, granted and what happened to the limit, "-" where an epoch had no
// call), as CSV ([WriteCSV]: blank cells where an epoch had no call) or as a
// PNG chart of pool and granted ([WritePNG]). The [Format] of the text is
// table or csv.
//
// # Autoscaling
//
// [SimulateScaled] runs the rate limiter and the scaling rule of package
// autoscale on one manual clock: a [Scaled] vertex whose replicas each
// process ReplicaRate messages a second, with messages arriving per epoch
// as its demand; each epoch's [ScaledEpoch] has its pool, backlog,
// processed count and replicas, and the rule's answer for the next epoch.
// [WriteScaledTable], [WriteScaledCSV] and [WriteScaledPNG] write them,
// and [AutoscaleFlags] are the flags of `vertex simulate --autoscale`.
//
// # Live changes
//
// [CheckLive] tells whether a config can replace another while a replica
// runs, naming the first setting that cannot by its YAML path, and
// [LiveSettings] lists those that can. [RenderConfigError] writes the errors
// of an invalid config with the names the caller gave its fields, such as
// the flags that set them.
package simulate
