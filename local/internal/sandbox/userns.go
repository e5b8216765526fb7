//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// envHoldUserns, in a process's environment, makes boxd's binary wait for
// the end of its standard input and exit: a process that exists only to
// own a new user namespace until boxd has opened it.
const envHoldUserns = "BOXD_HOLD_USERNS"

func init() {
	if os.Getenv(envHoldUserns) != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
}

// newUserns makes a user namespace in which the box user (UID, GID) is
// host uid and gid id, and nothing else is mapped, and returns it open.
// bubblewrap joins it (--userns) to set the sandbox up as root, which in
// it has every capability over the sandbox's namespaces and none over
// the host, and runs the box's processes as the box user.
//
// A process has to exist to make a namespace; bin (boxd's own binary)
// is started in it and ends once the namespace is open.
func newUserns(bin string, id int) (*os.File, error) {
	cmd := exec.Command(bin)
	cmd.Env = []string{envHoldUserns + "=1"}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: UID, HostID: id, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: GID, HostID: id, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	return ns, nil
}
