package direct

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// unmountAndRemove detaches every mount stacked on dir and removes the
// directory. A missing dir is fine. It relies on umount2 itself (EINVAL:
// not a mount point) rather than on mountinfo, which can miss entries while
// other mounts change.
func unmountAndRemove(dir string) error {
	if dir == "" {
		return nil
	}
	for i := 0; ; i++ {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		if i == 16 {
			return fmt.Errorf("unmount %s: still mounted after %d unmounts", dir, i+1)
		}
	}
	var err error
	for i := 0; i < 5; i++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}
