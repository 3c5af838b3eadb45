package redistest

import "strings"

// UnresolvableHost is a host name that no resolver finds and for which none
// sends a query: its first label is 64 bytes, one more than DNS allows (RFC
// 1035), so Go's resolver and libc's both answer "no such host" on this
// machine. A test of a Redis URL whose host does not resolve uses it, since
// tests never look a name up off the machine.
var UnresolvableHost = "no-such-host-" + strings.Repeat("x", 51) + ".invalid"
