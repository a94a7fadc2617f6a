import time, numpy as np, jaxsched
from jaxsched.generate import random_dag
from jaxsched.compiled import simulate_population_numba, population_fitness_numba
import jaxsched.compiled as c
p = random_dag(486, 188, integer=True, seed=0)
rng=np.random.default_rng(0)
proc=rng.integers(0,188,(100,486)); pri=rng.random((100,486))
population_fitness_numba(p, proc, pri)
in_ptr, in_order = p.in_edges
start, finish = np.zeros(proc.shape), np.zeros(proc.shape)
inputs = [c._frozen(a) for a in (p.comp, p.topological_order, in_ptr, p.src[in_order], p.data[in_order], p.arrival, p.inverse_bandwidth, proc, pri)]
for _ in range(3):
    t=time.process_time(); c._simulate_population(0, 100, *inputs, start, finish); t1=time.process_time()
    population_fitness_numba(p, proc, pri); t2=time.process_time()
    ref=[jaxsched.simulate(p, proc[k], pri[k]) for k in range(10)]; t3=time.process_time()
    print("kernel 1 core", t1-t, "full (cpu both threads)", t2-t1, "numpy per chromosome x100", (t3-t2)*10)
