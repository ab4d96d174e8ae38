package workspace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
)

// ProbeProgram returns a minimal static ELF executable that only exits with
// the given status. Backends run it in a trial sandbox to prove that they can
// start one under every control, without needing a Python root.
func ProbeProgram(status byte) ([]byte, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("probe program: architecture %s is not supported", runtime.GOARCH)
	}
	const base = 0x400000
	const hdr = 64 + 56
	// mov eax, 60 (exit); mov edi, status; syscall
	code := []byte{0xb8, 60, 0, 0, 0, 0xbf, status, 0, 0, 0, 0x0f, 0x05}
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	_ = binary.Write(&b, le, uint16(2))             // e_type: executable
	_ = binary.Write(&b, le, uint16(0x3e))          // e_machine: x86-64
	_ = binary.Write(&b, le, uint32(1))             // e_version
	_ = binary.Write(&b, le, uint64(base+hdr))      // e_entry
	_ = binary.Write(&b, le, uint64(64))            // e_phoff
	_ = binary.Write(&b, le, uint64(0))             // e_shoff
	_ = binary.Write(&b, le, uint32(0))             // e_flags
	_ = binary.Write(&b, le, uint16(64))            // e_ehsize
	_ = binary.Write(&b, le, uint16(56))            // e_phentsize
	_ = binary.Write(&b, le, uint16(1))             // e_phnum
	_ = binary.Write(&b, le, [3]uint16{})           // e_shentsize, e_shnum, e_shstrndx
	_ = binary.Write(&b, le, uint32(1))             // p_type: PT_LOAD
	_ = binary.Write(&b, le, uint32(5))             // p_flags: R+X
	_ = binary.Write(&b, le, uint64(0))             // p_offset
	_ = binary.Write(&b, le, uint64(base))          // p_vaddr
	_ = binary.Write(&b, le, uint64(base))          // p_paddr
	_ = binary.Write(&b, le, uint64(hdr+len(code))) // p_filesz
	_ = binary.Write(&b, le, uint64(hdr+len(code))) // p_memsz
	_ = binary.Write(&b, le, uint64(0x1000))        // p_align
	b.Write(code)
	return b.Bytes(), nil
}
