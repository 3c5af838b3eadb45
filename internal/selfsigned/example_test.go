package selfsigned_test

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/internal/selfsigned"
)

func ExampleCertificate() {
	cert, err := selfsigned.Certificate(time.Now(), "localhost", "127.0.0.1", "::1")
	if err != nil {
		panic(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	fmt.Println(cert.Leaf.DNSNames, cert.Leaf.IPAddresses, len(cfg.Certificates))
	// Output: [localhost] [127.0.0.1 ::1] 1
}
