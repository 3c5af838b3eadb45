package vertexconfig

import (
	"encoding"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// The enumerations of a config are the runtime's types; config holds their
// YAML names. [Check] parses each with its type's UnmarshalText and reports
// a name it rejects at the field's path; the functions below return the
// values of a validated config, or the defaults of what it leaves out.

// textPtr is a pointer to an enumeration that parses its YAML name.
type textPtr[T any] interface {
	*T
	encoding.TextUnmarshaler
}

// parse returns the value named name, or def when name is nil. A name its
// type rejects is [Check]'s to report; parse gives def for it.
func parse[T any, P textPtr[T]](name *string, def T) T {
	if name == nil {
		return def
	}
	var v T
	if err := P(&v).UnmarshalText([]byte(*name)); err != nil {
		return def
	}
	return v
}

// parseErr returns the error of parsing name as a T, nil for a nil name.
func parseErr[T any, P textPtr[T]](name *string) error {
	if name == nil {
		return nil
	}
	var v T
	return P(&v).UnmarshalText([]byte(*name))
}

// KeyMode returns perKey.keys, or its default, [ratelimit.FirstKey].
func KeyMode(p *config.PerKeyLimit) ratelimit.KeyMode {
	if p == nil {
		return ratelimit.FirstKey
	}
	return parse(p.Keys, ratelimit.FirstKey)
}

// MaxKeys returns perKey.maxKeys, or its default, [ratelimit.DefaultMaxKeys].
func MaxKeys(p *config.PerKeyLimit) int {
	if p == nil || p.MaxKeys == nil {
		return ratelimit.DefaultMaxKeys
	}
	return int(min(*p.MaxKeys, config.MaxPerKeyKeys))
}

// OnFull returns an edge's onFull, or its default, [route.RetryUntilSuccess].
func OnFull(e *config.Edge) route.OnFull { return parse(e.OnFull, route.RetryUntilSuccess) }

// Operator returns the operator of an edge's tags, or its default, [route.Or].
func Operator(t *config.TagConditions) route.Operator { return parse(t.Operator, route.Or) }

// Storage returns isb.jetstream.storage, or its default,
// [jetstream.FileStorage].
func Storage(j *config.JetStreamISB) jetstream.Storage {
	if j == nil {
		return jetstream.FileStorage
	}
	return parse(j.Storage, jetstream.FileStorage)
}

// DeliverFrom returns a JetStream source's deliver_policy, or its default,
// all.
func DeliverFrom(j *config.JetStreamSource) source.DeliverFrom {
	return parse(&j.DeliverPolicy, source.DeliverFrom{})
}

// OnFailure returns a sink's retryStrategy.onFailure, and whether it is set.
func OnFailure(r *config.RetryStrategy) (forward.OnFailure, bool) {
	if r == nil || r.OnFailure == nil {
		return forward.Retry, false
	}
	return parse(r.OnFailure, forward.Retry), true
}

// HTTPMaxQueueBytes returns an http source's maxQueueBytes, or its default,
// [source.DefaultHTTPMaxQueueBytes].
func HTTPMaxQueueBytes(h *config.HTTPSource) int64 {
	if h == nil || h.MaxQueueBytes == nil {
		return source.DefaultHTTPMaxQueueBytes
	}
	return clampInt64(*h.MaxQueueBytes)
}
