package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local/internal/errdefs"
)

// TestParsePublicKey: one authorized_keys line without options is a
// key; everything else is refused as an invalid argument that says why.
func TestParsePublicKey(t *testing.T) {
	line := func(k any) string {
		pub, err := gossh.NewPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))
	}
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	ed := line(edPub)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	big, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	cert := &gossh.Certificate{Key: signer.PublicKey(), CertType: gossh.UserCert, ValidBefore: gossh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, want, comment string // want "" means accepted
	}{
		{in: ed + " me@laptop", comment: "me@laptop"},
		{in: "  " + ed + "\n", comment: ""},
		{in: line(&big.PublicKey) + " rsa key", comment: "rsa key"},
		{in: line(&small.PublicKey), want: "RSA key of 1024 bits"},
		{in: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(cert))), want: "certificate"},
		{in: "restrict " + ed, want: "options"},
		{in: ed + "\n" + ed, want: "more than one key"},
		{in: "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----", want: "private key"},
		{in: "", want: "required"},
		{in: "ssh-ed25519", want: "not an OpenSSH public key"},
		{in: ed + " bad\x1bcomment", want: "control characters"},
	} {
		key, comment, err := ParsePublicKey(c.in)
		switch {
		case c.want == "" && (err != nil || comment != c.comment || key == nil):
			t.Errorf("ParsePublicKey(%.50q) = %v, %q, %v; want the key, comment %q", c.in, key, comment, err, c.comment)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errdefs.ErrInvalidArgument)):
			t.Errorf("ParsePublicKey(%.50q) = %v; want an invalid argument saying %q", c.in, err, c.want)
		}
	}
}
