package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CertHost is one host a certificate is made for: its name and the
// addresses (IPs or DNS names) its peers and clients reach it at.
type CertHost struct {
	Name  string
	Addrs []string
}

// certLife is how long the CA and host certificates are valid: long,
// since renewing them means `hostd cluster certs` and a restart of each
// host.
const certLife = 5 * 365 * 24 * time.Hour

// WriteCerts makes a cluster CA and, signed by it, one certificate per
// host (for etcd's peers and clients, and for hostd's calls between
// hosts), as PEM files in dir: ca.pem, then NAME.pem and NAME-key.pem per
// host. The CA's key is not written: a new host means new certificates
// for all. It refuses a dir that already holds a CA, so a fleet's
// certificates are never replaced by accident.
func WriteCerts(dir, cluster string, hosts []CertHost, now time.Time) error {
	if len(hosts) == 0 {
		return errors.New("fleet: certificates for no host: name each host and its addresses")
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err == nil {
		return fmt.Errorf("fleet: %s already holds a CA (ca.pem): remove the directory to make a new one", dir)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h.Name == "" || filepath.Base(h.Name) != h.Name || seen[h.Name] {
			return fmt.Errorf("fleet: host name %q: each host needs a distinct name usable as a file name", h.Name)
		}
		seen[h.Name] = true
		if len(h.Addrs) == 0 {
			return fmt.Errorf("fleet: host %s: no address: give the IPs or names its peers reach it at", h.Name)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "warmdesk fleet " + cluster + " CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.pem": pemBlock("CERTIFICATE", caDER)}
	for _, h := range hosts {
		cert, key, err := hostCert(ca, caKey, cluster, h, now)
		if err != nil {
			return fmt.Errorf("fleet: host %s: %w", h.Name, err)
		}
		files[h.Name+".pem"], files[h.Name+"-key.pem"] = cert, key
	}
	// Written into a new directory beside dir and renamed: all or nothing.
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".certs-")
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o600); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("fleet: %w", err)
		}
	}
	os.Remove(dir) // only when empty
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

// hostCert is one host's certificate and key, for both ends of TLS.
func hostCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cluster string, h CertHost, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: h.Name, OrganizationalUnit: []string{cluster}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, a := range h.Addrs {
		if ip := net.ParseIP(a); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, a)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// HostTLS names the files WriteCerts made for one host.
func HostTLS(dir, name string) *TLSFiles {
	return &TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
}
