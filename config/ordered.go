package config

// Ordered is Numaflow's ordered processing (spec.ordered and a vertex's
// ordered): with Enabled, a map or sink vertex runs a replica per partition
// of its input buffer, each reading its partition alone and processing its
// N-th message only once the (N-1)-th is written and acked; messages go to
// its partitions by the hash of their keys. A vertex's ordered overrides the
// pipeline's; sources and reduce vertices ignore both (a source emits in the
// order it reads, a reduce is partitioned by key already).
type Ordered struct {
	Enabled bool `yaml:"enabled"`
}

// IsEnabled reports whether ordered processing is asked for.
func (o *Ordered) IsEnabled() bool { return o != nil && o.Enabled }

// VertexOrdered reports whether ordered processing applies to the vertex
// called name: a map (a udf without groupBy) or a sink whose own ordered is
// enabled, or that has none and spec.ordered is enabled. It is false for a
// source, a reduce and a vertex p does not have.
func (p *Pipeline) VertexOrdered(name string) bool {
	v := p.Vertex(name)
	if v == nil || v.Source != nil || (v.UDF != nil && v.UDF.GroupBy != nil) {
		return false
	}
	if v.Ordered != nil {
		return v.Ordered.Enabled
	}
	return p.Spec.Ordered.IsEnabled()
}

// orderedBy names the field that makes vertex v ordered, for errors.
func orderedBy(path string, v *Vertex) string {
	if v.Ordered != nil {
		return path + ".ordered.enabled: true"
	}
	return "spec.ordered.enabled: true"
}

// ordered checks an ordered vertex at path, as Numaflow does (no scale.min
// or scale.max: its replicas are its partitions), and refuses what would
// let a later message of a partition overtake an earlier one in sluice: a
// per-key rate limit, which holds a key's messages while other keys' go on.
func (c *checker) ordered(path string, v *Vertex, p *Pipeline) {
	if !p.VertexOrdered(v.Name) {
		return
	}
	by := orderedBy(path, v)
	parts := int32(1)
	if v.Partitions != nil {
		parts = *v.Partitions
	}
	var scale Scale
	if v.Scale != nil {
		scale = *v.Scale
	}
	for _, f := range []struct {
		name string
		n    *int64
	}{{"min", scale.Min}, {"max", scale.Max}} {
		if f.n != nil {
			c.add(path+".scale."+f.name, "(%d) must not be set with ordered processing (%s): the replicas are fixed "+
				"to the partitions (%d), one reading each", *f.n, by, parts)
		}
	}
	rl, _ := p.VertexRateLimit(v.Name)
	if rl == nil || rl.PerKey == nil {
		return
	}
	at := "spec.limits.rateLimit.perKey"
	if v.Limits != nil && v.Limits.RateLimit != nil && v.Limits.RateLimit.PerKey != nil {
		at = path + ".limits.rateLimit.perKey"
	}
	c.add(at, "is not supported with ordered processing (%s) on vertex %s: a per-key limit holds back the messages of a key "+
		"over its limit while those of other keys go on, so a partition's messages would be processed out of order; "+
		"remove perKey or set %s.ordered.enabled: false", by, v.Name, path)
}
