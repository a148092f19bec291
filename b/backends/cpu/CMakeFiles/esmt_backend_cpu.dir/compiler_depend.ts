# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for esmt_backend_cpu.
