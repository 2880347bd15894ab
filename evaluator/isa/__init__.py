"""Target-neutral pieces of reading compiler output (instructions, loops, TTGIR). Each instruction set's
parser lives with its target family: evaluator/targets/amd/amdgcn.py, evaluator/targets/nvidia/sass.py."""
