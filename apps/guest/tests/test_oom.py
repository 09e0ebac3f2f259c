"""The OOM sweep picks only tasks that spun in system time alone (oom.py)."""

import os
import subprocess
import sys
import time
import unittest

from forkbox_guest import oom


class WedgedTest(unittest.TestCase):
    def test_a_task_in_system_time_only_is_wedged(self) -> None:
        before = {(4, 4): ("R", 38, 2438), (5, 5): ("R", 100, 50), (6, 6): ("S", 10, 10), (7, 8): ("R", 1, 0)}
        after = {(4, 4): ("R", 38, 2627), (5, 5): ("R", 250, 60), (6, 6): ("S", 10, 10), (7, 8): ("R", 1, 120)}
        # 4 spun (189 ticks of system time, no user time); 5 ran user code; 6 slept; 7 has a spinning thread
        self.assertEqual(oom.wedged(before, after, 2.0, 100), [4, 7])

    def test_too_little_system_time_or_a_state_change_is_not_wedged(self) -> None:
        before = {(4, 4): ("R", 38, 100), (5, 5): ("S", 0, 0)}
        after = {(4, 4): ("R", 38, 120), (5, 5): ("R", 0, 200)}
        self.assertEqual(oom.wedged(before, after, 2.0, 100), [])

    def test_a_new_task_is_not_judged(self) -> None:
        self.assertEqual(oom.wedged({}, {(4, 4): ("R", 0, 500)}, 2.0, 100), [])

    def test_a_killed_process_is_not_stuck_and_a_live_one_is(self) -> None:
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            # gone: reaped; a zombie would count as ended too
            self.assertEqual(oom.still_running([gone.pid, live.pid], 0.3), [live.pid])
        finally:
            live.kill()
            live.wait()

    def test_sample_reads_this_machines_tasks(self) -> None:
        # a busy child: running, in user time; it is sampled and never judged wedged
        child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.2)
            before = oom.sample(set())
            time.sleep(0.5)
            after = oom.sample(set())
            self.assertIn((child.pid, child.pid), after)
            self.assertNotIn(child.pid, oom.wedged(before, after, 0.5, os.sysconf("SC_CLK_TCK")))
            self.assertNotIn((os.getpid(), os.getpid()), oom.sample({os.getpid()}))
        finally:
            child.kill()
            child.wait()


if __name__ == "__main__":
    unittest.main()
