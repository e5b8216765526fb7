package agent

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pkg/sftp"
)

// EnvSFTP, set to 1, makes boxd's binary serve SFTP on its standard input
// and output instead of running normally. boxd's SSH server starts it in
// the box, through an exec session, for the sftp subsystem: it runs as the
// box user and sees the box's files as the box's processes do.
const EnvSFTP = "BOXD_SFTP_SERVER"

// ServeSFTP serves one SFTP session on standard input and output, from the
// working directory, and exits when the client is done.
func ServeSFTP() {
	os.Unsetenv(EnvSFTP)
	err := serveSFTP(stdio{os.Stdin, os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sftp:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveSFTP(rwc io.ReadWriteCloser) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	srv, err := sftp.NewServer(rwc, sftp.WithServerWorkingDirectory(wd))
	if err != nil {
		return err
	}
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// stdio is standard input and output as one stream.
type stdio struct {
	io.Reader
	io.WriteCloser
}
