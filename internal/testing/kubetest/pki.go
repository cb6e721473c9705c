package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// authority is the cluster's private certificate authority. It signs the
// apiserver's serving certificate and every client certificate the harness
// hands out, so clients verify the server and the server authenticates users
// by certificate (CN = user name, O = groups), as a real cluster does.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "leasehold-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// keyPair is a PEM-encoded certificate and its private key.
type keyPair struct {
	certPEM, keyPEM []byte
}

// serving issues the apiserver's certificate, valid for ip and the usual
// loopback addresses.
func (a *authority) serving(ip net.IP) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default"},
		IPAddresses: []net.IP{ip, net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// client issues a certificate that authenticates as user, member of groups.
func (a *authority) client(user string, groups []string) (keyPair, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *authority) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("PRIVATE KEY", keyDER)}, nil
}

// writeServiceAccountKeys writes the key pair the apiserver signs and
// verifies service-account tokens with (required by kube-apiserver even when
// no token is ever used).
func writeServiceAccountKeys(privatePath, publicPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(privatePath, pemBlock("EC PRIVATE KEY", der), 0o600); err != nil {
		return err
	}
	return os.WriteFile(publicPath, pemBlock("PUBLIC KEY", pub), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the platform's CSPRNG never fails on Linux
	}
	return n
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
