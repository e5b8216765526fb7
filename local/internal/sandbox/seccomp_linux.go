package sandbox

import (
	"encoding/binary"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// The seccomp filter of every sandbox refuses, with EPERM, the system
// calls of the kernel's key management (add_key, request_key, keyctl).
// Keyrings are kept by uid and by session, not by namespace: without the
// filter two boxes that map to one host uid (boxd not running as root)
// would share a user keyring, and any box could reach keys of the session
// keyring it was started in. On x86-64 the 32-bit and x32 entry points
// are covered too.

// Syscall numbers of the key management calls, by audit architecture.
var keySyscalls = map[uint32][]uint32{
	auditArchX86_64:  {248, 249, 250},
	auditArchI386:    {286, 287, 288},
	auditArchAArch64: {217, 218, 219},
	auditArchARM:     {309, 310, 311},
	auditArchRISCV64: {217, 218, 219},
}

const (
	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAArch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	auditArchRISCV64 = 0xc00000f3

	x32SyscallBit = 0x40000000

	// Offsets in struct seccomp_data.
	offNr   = 0
	offArch = 4
)

// nativeArch is this build's audit architecture, and the one its 32-bit
// programs may use.
func nativeArch() (native, compat uint32) {
	switch runtime.GOARCH {
	case "amd64":
		return auditArchX86_64, auditArchI386
	case "arm64":
		return auditArchAArch64, auditArchARM
	case "riscv64":
		return auditArchRISCV64, 0
	}
	return 0, 0
}

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// seccompFilter returns the filter as the classic BPF program bubblewrap
// reads (--seccomp): an array of struct sock_filter in host byte order.
// It returns nil on an architecture it does not know.
func seccompFilter() []byte {
	native, compat := nativeArch()
	if native == 0 {
		return nil
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	allow := stmt(ret, unix.SECCOMP_RET_ALLOW)
	deny := stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	// Per architecture: compare the number with each call, deny on a
	// match, allow otherwise.
	block := func(arch uint32) []unix.SockFilter {
		nrs := keySyscalls[arch]
		var p []unix.SockFilter
		p = append(p, stmt(ld, offNr))
		if arch == auditArchX86_64 {
			// x32 calls have their own numbers; no box needs them.
			p = append(p, jump(jge, x32SyscallBit, uint8(len(nrs)+1), 0))
		}
		for i, nr := range nrs {
			p = append(p, jump(jeq, nr, uint8(len(nrs)-i), 0))
		}
		return append(p, allow, deny)
	}
	nat := block(native)
	var prog []unix.SockFilter
	prog = append(prog, stmt(ld, offArch))
	if compat != 0 {
		com := block(compat)
		prog = append(prog, jump(jeq, native, 0, uint8(len(nat))))
		prog = append(prog, nat...)
		prog = append(prog, jump(jeq, compat, 0, uint8(len(com))))
		prog = append(prog, com...)
	} else {
		prog = append(prog, jump(jeq, native, 0, uint8(len(nat))))
		prog = append(prog, nat...)
	}
	// Any other architecture: nothing a box runs.
	prog = append(prog, stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)))
	out := make([]byte, 0, len(prog)*8)
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out
}

// seccompFile returns the filter in a file to hand to bubblewrap, or nil.
func seccompFile() (*os.File, error) {
	prog := seccompFilter()
	if prog == nil {
		return nil, nil
	}
	return dataFile("seccomp", prog)
}

// dataFile returns an unlinked file holding data, read from its start.
func dataFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("boxd-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
