package observe

import (
	"crypto/tls"
	"time"

	"github.com/sluiceflow/sluice/internal/selfsigned"
)

// CertValidity is how long a certificate of [SelfSignedTLS] is valid.
const CertValidity = selfsigned.Validity

// SelfSignedTLS returns a server TLS configuration with a certificate made at
// once and kept in memory only: an ECDSA P-256 key, subject and DNS name
// localhost, valid from an hour before now (for clocks a little behind) for
// [CertValidity]. That is how Numaflow's data plane serves its metrics port;
// what connects to it (the kubelet's probes, Numaflow's MonoVertex daemon,
// Prometheus with insecure_skip_verify) does not verify the certificate.
func SelfSignedTLS(now time.Time) (*tls.Config, error) {
	cert, err := selfsigned.Certificate(now, "localhost")
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
