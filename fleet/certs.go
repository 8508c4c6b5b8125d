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
// host (for etcd's peers and clients), as PEM files in dir: ca.pem and
// ca-key.pem, then NAME.pem and NAME-key.pem per host. ca-key.pem signs
// the certificates of hosts added later (AddHostCert): keep it, and keep
// it off the hosts. It refuses a dir that already holds a CA, so a
// fleet's certificates are never replaced by accident.
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
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.pem": pemBlock("CERTIFICATE", caDER), "ca-key.pem": pemBlock("EC PRIVATE KEY", caKeyDER)}
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

// AddHostCert signs a certificate for a host joining the fleet later,
// with the CA WriteCerts left in dir, and writes NAME.pem and NAME-key.pem
// beside it. A host of that name already there is refused.
func AddHostCert(dir, cluster string, h CertHost, now time.Time) error {
	if h.Name == "" || filepath.Base(h.Name) != h.Name || len(h.Addrs) == 0 {
		return fmt.Errorf("fleet: host %q: give a name usable as a file name and the addresses its peers reach it at", h.Name)
	}
	if _, err := os.Stat(filepath.Join(dir, h.Name+".pem")); err == nil {
		return fmt.Errorf("fleet: %s already holds a certificate for %s", dir, h.Name)
	}
	ca, err := readPEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE")
	if err != nil {
		return fmt.Errorf("fleet: the fleet's CA: %w (hostd cluster certs made it, with ca-key.pem, in the directory it wrote)", err)
	}
	caCert, err := x509.ParseCertificate(ca)
	if err != nil {
		return fmt.Errorf("fleet: ca.pem: %w", err)
	}
	keyDER, err := readPEM(filepath.Join(dir, "ca-key.pem"), "EC PRIVATE KEY")
	if err != nil {
		return fmt.Errorf("fleet: the CA's key: %w", err)
	}
	caKey, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return fmt.Errorf("fleet: ca-key.pem: %w", err)
	}
	cert, key, err := hostCert(caCert, caKey, cluster, h, now)
	if err != nil {
		return fmt.Errorf("fleet: host %s: %w", h.Name, err)
	}
	// The key first: a certificate without its key is never left.
	if err := os.WriteFile(filepath.Join(dir, h.Name+"-key.pem"), key, 0o600); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, h.Name+".pem"), cert, 0o600); err != nil {
		os.Remove(filepath.Join(dir, h.Name+"-key.pem"))
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

func readPEM(path, kind string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != kind {
		return nil, fmt.Errorf("%s holds no %s", path, kind)
	}
	return block.Bytes, nil
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
