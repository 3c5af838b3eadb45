// Package keda serves KEDA's external scaler (externalscaler.ExternalScaler,
// package pkg/apis/proto/externalscaler) for sluice vertices: `vertex
// scaler`. KEDA asks it, for a ScaledObject whose trigger's metadata names
// a vertex, how many replicas that vertex should have; it answers with the
// count of the vertex's [autoscale.Scaler].
//
// # What it reads
//
// A [Server] reads each vertex's replicas every [Config.Interval], on the
// HTTP port each serves /status and /metrics on (--metrics-addr): a host
// that resolves to several IPs (a Kubernetes headless Service) is a replica
// per IP, one that resolves to none is no replica. Of each it takes the
// pool and max of its rate limit and of each group it joins, why it is
// throttled (rate_limited: throttled; downstream_throttled: paused), what
// it has read (the rate is the growth of readTotal between two reads) and
// the pending count of its source (the gauge sluice_source_pending; the
// largest of the replicas', as each tells the source's whole count). A
// pool that fell while its max held is a cut.
//
// # What it answers
//
//   - GetMetricSpec: the metric [MetricName] with a target of 1.
//   - GetMetrics: the rule's count. KEDA's HPA, with an AverageValue target
//     of 1, asks for ceil(value / 1) replicas: the count.
//   - IsActive: something is pending or processed; an Unavailable error
//     while no replica answers.
//   - StreamIsActive: IsActive's answer at once and at each change.
//
// While no replica answers, GetMetrics holds the last count and each read
// logs a warning. The trigger's metadata key vertex ([MetadataVertex])
// names the vertex; a name the scaler does not serve is an InvalidArgument
// error that names it and the vertices served.
package keda
