package kafka

import (
	"strconv"
	"strings"
)

// roleSet is a set of roles.
type roleSet uint8

const (
	forSource roleSet = 1 << RoleSource
	forSink   roleSet = 1 << RoleSink
	forBoth           = forSource | forSink
)

func (s roleSet) has(r Role) bool { return s&(1<<r) != 0 }

// property is what sluice knows of one librdkafka property.
type property struct {
	roles roleSet
	// same names the property this one is another name of.
	same string
	// valid returns "" for a valid value, else what a valid value is.
	valid func(v string) string
}

// maxFetchBytes is the largest fetch the client reads (its broker read limit).
const maxFetchBytes = 100 << 20

// properties are the librdkafka properties sluice maps to its client. Any
// other property is ignored (and reported by Properties.Unknown).
var properties = map[string]property{
	// Consumer.
	"auto.offset.reset":             {forSource, "", oneOf("earliest", "smallest", "beginning", "latest", "largest", "end")},
	"session.timeout.ms":            {forSource, "", millis(100, 3600000)},
	"heartbeat.interval.ms":         {forSource, "", millis(1, 3600000)},
	"max.poll.interval.ms":          {forSource, "", millis(100, 86400000)},
	"fetch.max.bytes":               {forSource, "", count(1024, maxFetchBytes, "bytes")},
	"max.partition.fetch.bytes":     {forSource, "", count(1, maxFetchBytes, "bytes")},
	"fetch.wait.max.ms":             {forSource, "", millis(10, 300000)},
	"fetch.min.bytes":               {forSource, "", count(1, 100000000, "bytes")},
	"partition.assignment.strategy": {forSource, "", strategies},
	"group.instance.id":             {forSource, "", text(249)},
	"enable.auto.commit":            {forSource, "", autoCommit},
	"auto.commit.interval.ms":       {forSource, "", millis(0, 86400000)},
	// Both.
	"client.id":          {forBoth, "", text(256)},
	"request.timeout.ms": {forBoth, "", millis(100, 900000)},
	"security.protocol":  {forBoth, "", oneOf("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")},
	// Producer.
	"linger.ms":              {forSink, "", linger},
	"queue.buffering.max.ms": {forSink, "linger.ms", linger},
	"compression.type":       {forSink, "", oneOf("none", "gzip", "snappy", "lz4", "zstd")},
	"compression.codec":      {forSink, "compression.type", oneOf("none", "gzip", "snappy", "lz4", "zstd")},
	"acks":                   {forSink, "", oneOf("all", "-1", "0", "1")},
	"request.required.acks":  {forSink, "acks", oneOf("all", "-1", "0", "1")},
	"enable.idempotence":     {forSink, "", oneOf("true", "false")},
	"message.max.bytes":      {forSink, "", count(1000, maxFetchBytes, "bytes")},
	"batch.size":             {forSink, "", count(1000, maxFetchBytes, "bytes")},
	"message.timeout.ms":     {forSink, "", delivery},
	"delivery.timeout.ms":    {forSink, "message.timeout.ms", delivery},
}

// oneOf accepts the values given, in any case.
func oneOf(values ...string) func(string) string {
	return func(v string) string {
		for _, ok := range values {
			if strings.EqualFold(v, ok) {
				return ""
			}
		}
		return "must be one of " + strings.Join(values, ", ")
	}
}

// count accepts whole numbers from lo to hi.
func count(lo, hi int64, unit string) func(string) string {
	return func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return "must be a whole number of " + unit + " from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10)
		}
		return ""
	}
}

func millis(lo, hi int64) func(string) string { return count(lo, hi, "milliseconds") }

// text accepts a non-empty string of at most n bytes.
func text(n int) func(string) string {
	return func(v string) string {
		if v == "" || len(v) > n {
			return "must be a name of 1 to " + strconv.Itoa(n) + " bytes"
		}
		return ""
	}
}

func autoCommit(v string) string {
	if strings.EqualFold(v, "false") {
		return ""
	}
	return "must be false: sluice commits offsets itself, once the messages are acked (at least once)"
}

// strategies accepts a comma-separated list of range, roundrobin and
// cooperative-sticky, the last alone: a group cannot mix cooperative and
// eager rebalancing.
func strategies(v string) string {
	const want = "must be range, roundrobin, both (comma-separated), or cooperative-sticky alone"
	names := strings.Split(v, ",")
	for _, n := range names {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "range", "roundrobin":
		case "cooperative-sticky":
			if len(names) > 1 {
				return want
			}
		default:
			return want
		}
	}
	return ""
}

// linger accepts milliseconds from 0 to 60000, with a fraction (librdkafka's
// linger.ms is a float).
func linger(v string) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 60000 {
		return "must be a number of milliseconds from 0 to 60000"
	}
	return ""
}

// delivery accepts 0 (no limit) or at least a second.
func delivery(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || (n != 0 && (n < 1000 || n > 2147483647)) {
		return "must be 0 (no limit) or a whole number of milliseconds from 1000 to 2147483647"
	}
	return ""
}
